//! Traces as Arrow tables: one row per record, the fields of a trace record as columns, with the involved
//! object's fields flattened (`involved.namespace`). Rows are read in place: a record borrows its strings
//! from the column buffers, so a replay from a table copies nothing per row before the correlator does.
//!
//! Columns, all optional except `t_ns` and at least one `involved.*` column (as a JSON record needs `t_ns`
//! and `involved`):
//! - `t_ns`: int64 nanoseconds since the Unix epoch, or a timestamp of any unit; never null;
//! - the strings of [`STRING_COLUMNS`]: utf8, large_utf8, utf8_view, or a dictionary of one of them
//!   (pandas categoricals, polars enums); null reads as empty, as in a JSON record;
//! - `annotations`: a map of string to string.
//!
//! A column of another name or type is an error naming it, so a misspelt column is caught.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::builder::{Int32Builder, MapBuilder, StringBuilder, StringDictionaryBuilder, UInt64Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::ArrowDictionaryKeyType;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, DictionaryArray, Int64Array, MapArray, RecordBatch};
use arrow_buffer::{ArrowNativeType, NullBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema, TimeUnit};

use super::counts::Action;
use super::simulator::{Simulator, Step};
#[cfg(test)]
use super::trace::InvolvedRecord;
use super::trace::Record;
use serde::de::{Deserializer, Visitor};

use crate::error::{Error, Result};
use crate::threads;

/// The string columns, in the order [`BatchView::record`] reads them.
pub const STRING_COLUMNS: [&str; 12] = [
    "source_component",
    "source_host",
    "involved.kind",
    "involved.namespace",
    "involved.name",
    "involved.uid",
    "involved.api_version",
    "involved.resource_version",
    "involved.field_path",
    "type",
    "reason",
    "message",
];

pub const TIME_COLUMN: &str = "t_ns";
pub const ANNOTATIONS_COLUMN: &str = "annotations";

/// Every trace column, in the order a table made from records has them.
pub fn columns() -> Vec<&'static str> {
    let mut all = vec![TIME_COLUMN];
    all.extend(STRING_COLUMNS);
    all.push(ANNOTATIONS_COLUMN);
    all
}

/// Where each known column sits in a schema, checked once per table.
#[derive(Clone, Debug)]
pub struct Layout {
    time: usize,
    strings: [Option<usize>; STRING_COLUMNS.len()],
    annotations: Option<usize>,
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

fn is_text_column(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(k, v) => k.is_dictionary_key_type() && is_text(v),
        t => is_text(t) || *t == DataType::Null,
    }
}

fn is_time_column(t: &DataType) -> bool {
    matches!(t, DataType::Int64 | DataType::Timestamp(..))
}

fn is_annotations_column(t: &DataType) -> bool {
    match t {
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(fields) => fields.len() == 2 && fields.iter().all(|f| is_text(f.data_type())),
            _ => false,
        },
        DataType::Null => true,
        _ => false,
    }
}

impl Layout {
    /// Checks a schema against the trace columns: every column known and of a readable type, `t_ns` and
    /// one `involved.*` column present.
    pub fn new(schema: &Schema) -> Result<Self> {
        let mut layout = Layout { time: usize::MAX, strings: [None; STRING_COLUMNS.len()], annotations: None };
        for (i, field) in schema.fields().iter().enumerate() {
            let name = field.name().as_str();
            let t = field.data_type();
            let ok = if name == TIME_COLUMN {
                layout.time = i;
                is_time_column(t)
            } else if name == ANNOTATIONS_COLUMN {
                layout.annotations = Some(i);
                is_annotations_column(t)
            } else if let Some(k) = STRING_COLUMNS.iter().position(|c| *c == name) {
                layout.strings[k] = Some(i);
                is_text_column(t)
            } else {
                return Err(Error::value(
                    name,
                    format!("unknown trace column (the columns are {TIME_COLUMN}, {}, {ANNOTATIONS_COLUMN})", {
                        STRING_COLUMNS.join(", ")
                    }),
                ));
            };
            if !ok {
                let expected = if name == TIME_COLUMN {
                    "int64 nanoseconds or a timestamp"
                } else if name == ANNOTATIONS_COLUMN {
                    "a map of string to string"
                } else {
                    "a string column"
                };
                return Err(Error::type_(name, format!("expected {expected}, got {t}")));
            }
        }
        if layout.time == usize::MAX {
            return Err(Error::value(TIME_COLUMN, "missing column (every record needs its time)"));
        }
        if layout.strings[2..9].iter().all(Option::is_none) {
            return Err(Error::value("involved", "missing columns: a trace needs at least one involved.* column"));
        }
        Ok(layout)
    }
}

/// A string column of one batch, read without copying.
enum TextColumn<'a> {
    Absent,
    /// The common case, unwrapped from `Plain` to save a dispatch per value.
    Utf8(Offsets<'a, i32>),
    Plain(Plain<'a>),
    /// A dictionary: its keys (any integer type) index its values.
    Dict(Option<&'a NullBuffer>, DictKeys<'a>, Plain<'a>),
}

/// A column of strings themselves (not a dictionary of them).
enum Plain<'a> {
    Null,
    Utf8(Offsets<'a, i32>),
    Large(Offsets<'a, i64>),
    View(&'a arrow_array::StringViewArray),
}

/// A utf8 or large_utf8 column as its buffers: the hot path reads a value as one slice of `data`.
struct Offsets<'a, O> {
    offsets: &'a [O],
    data: &'a [u8],
    nulls: Option<&'a NullBuffer>,
}

impl<'a, O: arrow_array::OffsetSizeTrait> Offsets<'a, O> {
    fn of(a: &'a arrow_array::GenericStringArray<O>) -> Self {
        let nulls = a.nulls().filter(|n| n.null_count() > 0);
        Offsets { offsets: a.value_offsets(), data: a.values().as_slice(), nulls }
    }

    #[inline(always)]
    fn get(&self, row: usize) -> &'a str {
        if self.nulls.is_some_and(|n| n.is_null(row)) {
            return "";
        }
        let bytes = &self.data[self.offsets[row].as_usize()..self.offsets[row + 1].as_usize()];
        // SAFETY: `Table::new` validated the column (`validate`): its offsets fall on UTF-8 boundaries
        // of valid UTF-8 data, as the `value` accessor of the array assumes as well.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
}

/// A dictionary's keys as the slice of their native integers.
enum DictKeys<'a> {
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
}

impl DictKeys<'_> {
    #[inline(always)]
    fn get(&self, row: usize) -> usize {
        match self {
            DictKeys::I8(k) => k[row].as_usize(),
            DictKeys::I16(k) => k[row].as_usize(),
            DictKeys::I32(k) => k[row].as_usize(),
            DictKeys::I64(k) => k[row].as_usize(),
            DictKeys::U8(k) => k[row].as_usize(),
            DictKeys::U16(k) => k[row].as_usize(),
            DictKeys::U32(k) => k[row].as_usize(),
            DictKeys::U64(k) => k[row].as_usize(),
        }
    }
}

fn dict<'a, K: ArrowDictionaryKeyType>(
    a: &'a dyn Array,
    keys: impl FnOnce(&'a [K::Native]) -> DictKeys<'a>,
) -> TextColumn<'a> {
    let d: &'a DictionaryArray<K> = a.as_dictionary::<K>();
    TextColumn::Dict(d.keys().nulls(), keys(d.keys().values()), Plain::of(d.values().as_ref()))
}

impl<'a> Plain<'a> {
    /// A string column whose type `Layout::new` accepted (a dictionary's values are strings too).
    fn of(a: &'a dyn Array) -> Plain<'a> {
        match a.data_type() {
            DataType::Utf8 => Plain::Utf8(Offsets::of(a.as_string::<i32>())),
            DataType::LargeUtf8 => Plain::Large(Offsets::of(a.as_string::<i64>())),
            DataType::Utf8View => Plain::View(a.as_string_view()),
            _ => Plain::Null,
        }
    }

    #[inline(always)]
    fn get(&self, row: usize) -> &'a str {
        match self {
            Plain::Null => "",
            Plain::Utf8(s) => s.get(row),
            Plain::Large(s) => s.get(row),
            Plain::View(s) => {
                if s.is_null(row) {
                    ""
                } else {
                    s.value(row)
                }
            }
        }
    }
}

impl<'a> TextColumn<'a> {
    fn of(a: &'a dyn Array) -> TextColumn<'a> {
        match a.data_type() {
            DataType::Dictionary(k, _) => match k.as_ref() {
                DataType::Int8 => dict::<Int8Type>(a, DictKeys::I8),
                DataType::Int16 => dict::<Int16Type>(a, DictKeys::I16),
                DataType::Int32 => dict::<Int32Type>(a, DictKeys::I32),
                DataType::Int64 => dict::<Int64Type>(a, DictKeys::I64),
                DataType::UInt8 => dict::<UInt8Type>(a, DictKeys::U8),
                DataType::UInt16 => dict::<UInt16Type>(a, DictKeys::U16),
                DataType::UInt32 => dict::<UInt32Type>(a, DictKeys::U32),
                _ => dict::<UInt64Type>(a, DictKeys::U64),
            },
            DataType::Utf8 => TextColumn::Utf8(Offsets::of(a.as_string::<i32>())),
            DataType::Null => TextColumn::Absent,
            _ => TextColumn::Plain(Plain::of(a)),
        }
    }

    #[inline(always)]
    fn get(&self, row: usize) -> &'a str {
        match self {
            TextColumn::Utf8(s) => s.get(row),
            TextColumn::Absent => "",
            TextColumn::Plain(p) => p.get(row),
            TextColumn::Dict(nulls, keys, values) => {
                if nulls.is_some_and(|n| n.is_null(row)) {
                    ""
                } else {
                    values.get(keys.get(row))
                }
            }
        }
    }
}

/// The time column of one batch as nanoseconds: its values and how many nanoseconds one unit is.
struct Times<'a> {
    values: &'a [i64],
    scale: i64,
}

impl<'a> Times<'a> {
    fn of(a: &'a dyn Array) -> Times<'a> {
        let (values, scale): (&'a [i64], i64) = match a.data_type() {
            DataType::Timestamp(TimeUnit::Second, _) => {
                (a.as_primitive::<TimestampSecondType>().values(), 1_000_000_000)
            }
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                (a.as_primitive::<TimestampMillisecondType>().values(), 1_000_000)
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                (a.as_primitive::<TimestampMicrosecondType>().values(), 1_000)
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => (a.as_primitive::<TimestampNanosecondType>().values(), 1),
            _ => (a.as_primitive::<Int64Type>().values(), 1),
        };
        Times { values, scale }
    }

    #[inline(always)]
    fn get(&self, row: usize, row_number: u64) -> Result<i64> {
        let v = self.values[row];
        if self.scale == 1 {
            return Ok(v);
        }
        v.checked_mul(self.scale).ok_or_else(|| {
            Error::value(format!("row {row_number}: {TIME_COLUMN}"), "out of range (nanoseconds past the year 2262)")
        })
    }
}

/// A utf8 column without nulls, or an absent column (offsets `[0]`, step 0): the usual columns, read with
/// no dispatch and no null check.
#[derive(Clone, Copy)]
struct Direct<'a> {
    offsets: &'a [i32],
    data: &'a [u8],
    step: usize,
}

impl<'a> Direct<'a> {
    const ABSENT: Direct<'static> = Direct { offsets: &[0], data: &[], step: 0 };

    fn of(column: &TextColumn<'a>) -> Option<Self> {
        match column {
            TextColumn::Absent => Some(Direct::ABSENT),
            TextColumn::Utf8(o) if o.nulls.is_none() => Some(Direct { offsets: o.offsets, data: o.data, step: 1 }),
            _ => None,
        }
    }

    #[inline(always)]
    fn get(&self, row: usize) -> &'a str {
        let i = row * self.step;
        let bytes = &self.data[self.offsets[i].as_usize()..self.offsets[i + self.step].as_usize()];
        // SAFETY: as in `Offsets::get`, the column was validated by `Table::new`; an absent column reads "".
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
}

/// One record batch, ready to hand out records.
pub struct BatchView<'a> {
    times: Times<'a>,
    strings: [TextColumn<'a>; STRING_COLUMNS.len()],
    /// The string columns when all of them are `Direct`.
    direct: Option<[Direct<'a>; STRING_COLUMNS.len()]>,
    annotations: Option<&'a MapArray>,
    /// The number of the batch's first row in the whole table, for error messages.
    first_row: u64,
    len: usize,
}

impl<'a> BatchView<'a> {
    pub fn new(layout: &Layout, batch: &'a RecordBatch, first_row: u64) -> Self {
        let column = |i: Option<usize>| i.map_or(TextColumn::Absent, |i| TextColumn::of(batch.column(i).as_ref()));
        let strings: [TextColumn<'a>; STRING_COLUMNS.len()] = std::array::from_fn(|k| column(layout.strings[k]));
        let direct = strings.iter().map(Direct::of).collect::<Option<Vec<_>>>().and_then(|d| d.try_into().ok());
        BatchView {
            times: Times::of(batch.column(layout.time).as_ref()),
            strings,
            direct,
            annotations: layout
                .annotations
                .map(|i| batch.column(i))
                .filter(|c| matches!(c.data_type(), DataType::Map(..)))
                .map(|c| c.as_map()),
            first_row,
            len: batch.num_rows(),
        }
    }

    pub fn rows(&self) -> usize {
        self.len
    }

    /// Row `row` written over `r` (a record reused from row to row costs no moves).
    #[inline(always)]
    pub fn fill(&self, row: usize, r: &mut Record<'a>) -> Result<()> {
        r.t_ns = self.times.get(row, self.first_row + row as u64)?;
        let i = &mut r.involved;
        let fields = [
            &mut r.source_component,
            &mut r.source_host,
            &mut i.kind,
            &mut i.namespace,
            &mut i.name,
            &mut i.uid,
            &mut i.api_version,
            &mut i.resource_version,
            &mut i.field_path,
            &mut r.type_,
            &mut r.reason,
            &mut r.message,
        ];
        match &self.direct {
            Some(columns) => {
                for (field, column) in fields.into_iter().zip(columns) {
                    *field = Cow::Borrowed(column.get(row));
                }
            }
            None => {
                for (field, column) in fields.into_iter().zip(&self.strings) {
                    *field = Cow::Borrowed(column.get(row));
                }
            }
        }
        if self.annotations.is_some() {
            r.annotations = self.annotations(row);
        }
        Ok(())
    }

    fn annotations(&self, row: usize) -> BTreeMap<String, String> {
        let Some(m) = self.annotations.filter(|m| !m.is_null(row)) else { return BTreeMap::new() };
        let entries = m.value(row);
        let (keys, values) = (Plain::of(entries.column(0).as_ref()), Plain::of(entries.column(1).as_ref()));
        (0..entries.len()).map(|i| (keys.get(i).to_owned(), values.get(i).to_owned())).collect()
    }
}

/// `validate_full`, with utf8 and large_utf8 values checked in whole passes over the offsets and the data
/// rather than value by value (most of a replay's table import otherwise).
fn validate(column: &dyn Array) -> std::result::Result<(), ArrowError> {
    match column.data_type() {
        DataType::Utf8 => validate_strings(column.as_string::<i32>()),
        DataType::LargeUtf8 => validate_strings(column.as_string::<i64>()),
        _ => column.to_data().validate_full(),
    }
}

fn validate_strings<O: arrow_array::OffsetSizeTrait>(
    strings: &arrow_array::GenericStringArray<O>,
) -> std::result::Result<(), ArrowError> {
    // Buffer sizes, and the first and last offsets within the data; then the null count.
    let data = strings.to_data();
    data.validate()?;
    data.validate_nulls()?;
    let invalid = |what: &str| Err(ArrowError::InvalidArgumentError(what.to_owned()));
    let offsets = strings.value_offsets();
    // Non-negative and not decreasing: with `validate`, every offset is then within the data.
    if offsets.first().is_some_and(|o| *o < O::zero()) || offsets.windows(2).any(|w| w[0] > w[1]) {
        return invalid("offsets are negative or decreasing");
    }
    let (Some(first), Some(last)) = (offsets.first(), offsets.last()) else { return Ok(()) };
    let values = &strings.values().as_slice()[first.as_usize()..last.as_usize()];
    if values.is_ascii() {
        return Ok(());
    }
    let Ok(text) = std::str::from_utf8(values) else { return invalid("invalid UTF-8") };
    if offsets.iter().all(|o| text.is_char_boundary(o.as_usize() - first.as_usize())) {
        Ok(())
    } else {
        invalid("an offset splits a UTF-8 character")
    }
}

/// Checks a batch of the layout's schema whose first row is row `first` of the table: rows are read without
/// checking offsets, UTF-8 or dictionary keys, so data from another library through the C interface is
/// checked once here instead.
fn check(layout: &Layout, b: &RecordBatch, first: u64) -> Result<()> {
    for (field, column) in b.schema_ref().fields().iter().zip(b.columns()) {
        validate(column.as_ref())
            .map_err(|e| Error::value(field.name().as_str(), format!("invalid Arrow data: {e}")))?;
    }
    let times = b.column(layout.time);
    if let Some(row) = (0..times.len()).find(|&i| times.is_null(i)) {
        return Err(Error::value(
            format!("row {}: {TIME_COLUMN}", first + row as u64),
            "null (every record needs its time)",
        ));
    }
    Ok(())
}

/// A trace held as Arrow record batches, checked once; shared by the threads of a sweep.
pub struct Table {
    layout: Layout,
    batches: Vec<RecordBatch>,
    /// The number of each batch's first row in the table.
    starts: Vec<u64>,
}

impl Table {
    pub fn new(schema: &Schema, batches: Vec<RecordBatch>) -> Result<Self> {
        let mut table = Table::empty(schema)?;
        table.batches.reserve(batches.len());
        for b in batches {
            table.push(b)?;
        }
        Ok(table)
    }

    fn empty(schema: &Schema) -> Result<Self> {
        Ok(Table { layout: Layout::new(schema)?, batches: Vec::new(), starts: Vec::new() })
    }

    /// Appends a batch of the table's schema, checked.
    fn push(&mut self, b: RecordBatch) -> Result<()> {
        check(&self.layout, &b, self.rows())?;
        self.append(b);
        Ok(())
    }

    /// Appends a batch checked already; returns its index.
    fn append(&mut self, b: RecordBatch) -> usize {
        self.starts.push(self.rows());
        self.batches.push(b);
        self.batches.len() - 1
    }

    pub fn rows(&self) -> u64 {
        self.starts.last().zip(self.batches.last()).map_or(0, |(s, b)| s + b.num_rows() as u64)
    }

    /// Hands every record of a stream of batches (of `schema`, from `next` until it returns None) to `f`, as
    /// they arrive: a thread of its own pulls and checks up to `READ_AHEAD` batches ahead, so that decoding
    /// them (a Parquet file's) overlaps the replay. Returns the table they make, to be replayed again.
    pub fn each_streamed(
        schema: &Schema,
        mut next: impl FnMut() -> Option<Result<RecordBatch>> + Send,
        mut f: impl FnMut(&Record<'_>) -> Result<()>,
    ) -> Result<Table> {
        const READ_AHEAD: usize = 2;
        let mut table = Table::empty(schema)?;
        let layout = table.layout.clone();
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD);
            let reader = move || {
                let mut rows = 0;
                while let Some(b) = next() {
                    let b = b.and_then(|b| check(&layout, &b, rows).map(|()| b));
                    rows += b.as_ref().map_or(0, |b| b.num_rows() as u64);
                    // An error ends the stream; so does a replay that stopped listening.
                    if b.is_err() | tx.send(b).is_err() {
                        break;
                    }
                }
            };
            threads::spawn_scoped(scope, "trace-reader", reader)?;
            for b in rx {
                let i = table.append(b?);
                let view = table.view(i);
                let mut record = Record::default();
                for row in 0..view.rows() {
                    view.fill(row, &mut record)?;
                    f(&record)?;
                }
            }
            Ok(table)
        })
    }

    pub fn batches(&self) -> usize {
        self.batches.len()
    }

    /// Batch `i` as a view.
    pub fn view(&self, i: usize) -> BatchView<'_> {
        BatchView::new(&self.layout, &self.batches[i], self.starts[i])
    }

    /// The batches as views, in order.
    pub fn views(&self) -> impl Iterator<Item = BatchView<'_>> {
        (0..self.batches.len()).map(|i| self.view(i))
    }

    /// Hands the rows whose number `wanted` accepts to `f` with their number, in order, until `f` returns
    /// false or fails; the other rows are not read.
    pub fn each_where(
        &self,
        mut wanted: impl FnMut(usize) -> bool,
        mut f: impl FnMut(usize, &Record<'_>) -> Result<bool>,
    ) -> Result<()> {
        let mut record = Record::default();
        let mut i = 0;
        for view in self.views() {
            for row in 0..view.rows() {
                if wanted(i) {
                    view.fill(row, &mut record)?;
                    if !f(i, &record)? {
                        return Ok(());
                    }
                }
                i += 1;
            }
        }
        Ok(())
    }

    /// Hands every record to `f` in order, until `f` returns false or fails. One record is reused from row
    /// to row, its strings borrowed from the columns.
    pub fn each(&self, mut f: impl FnMut(&Record<'_>) -> Result<bool>) -> Result<()> {
        let mut record = Record::default();
        for view in self.views() {
            for row in 0..view.rows() {
                view.fill(row, &mut record)?;
                if !f(&record)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Records as one record batch with the trace columns (`annotations` only when some record has them).
pub fn records_to_batch(records: &[Record<'_>]) -> RecordBatch {
    let mut b = BatchBuilder::default();
    for r in records {
        b.push(r);
    }
    b.finish(false)
}

/// Builds a record batch with the trace columns, one record at a time.
pub struct BatchBuilder {
    times: Vec<i64>,
    strings: [StringBuilder; STRING_COLUMNS.len()],
    annotations: MapBuilder<StringBuilder, StringBuilder>,
    any_annotations: bool,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            times: Vec::new(),
            strings: std::array::from_fn(|_| StringBuilder::new()),
            annotations: MapBuilder::new(None, StringBuilder::new(), StringBuilder::new()),
            any_annotations: false,
        }
    }
}

impl BatchBuilder {
    /// The records pushed since the last batch.
    pub fn rows(&self) -> usize {
        self.times.len()
    }

    pub fn push(&mut self, r: &Record<'_>) {
        self.times.push(r.t_ns);
        let i = &r.involved;
        let fields = [
            &r.source_component,
            &r.source_host,
            &i.kind,
            &i.namespace,
            &i.name,
            &i.uid,
            &i.api_version,
            &i.resource_version,
            &i.field_path,
            &r.type_,
            &r.reason,
            &r.message,
        ];
        for (b, v) in self.strings.iter_mut().zip(fields) {
            b.append_value(v);
        }
        for (k, v) in &r.annotations {
            self.annotations.keys().append_value(k);
            self.annotations.values().append_value(v);
        }
        self.any_annotations |= !r.annotations.is_empty();
        // A map builder's append fails only when keys and values differ in number.
        self.annotations.append(true).expect("as many keys as values");
    }

    /// The batch of the records pushed since the last one; `annotations` only when some record has them,
    /// or always with `with_annotations` (so that batches made apart share one schema).
    pub fn finish(&mut self, with_annotations: bool) -> RecordBatch {
        let mut fields = vec![Field::new(TIME_COLUMN, DataType::Int64, false)];
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(std::mem::take(&mut self.times)))];
        for (name, b) in STRING_COLUMNS.iter().zip(&mut self.strings) {
            fields.push(Field::new(*name, DataType::Utf8, false));
            columns.push(Arc::new(b.finish()));
        }
        let a = self.annotations.finish();
        if with_annotations || std::mem::take(&mut self.any_annotations) {
            fields.push(Field::new(ANNOTATIONS_COLUMN, a.data_type().clone(), false));
            columns.push(Arc::new(a));
        }
        // The columns are built to the schema's types and lengths, which is all `try_new` checks.
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("columns match the schema")
    }
}

/// The decisions of a replay as columns: index, action, and for a write the event's name, count and
/// message, and for a patch its body.
pub struct DecisionColumns {
    index: UInt64Builder,
    action: StringDictionaryBuilder<Int8Type>,
    name: StringBuilder,
    count: Int32Builder,
    message: StringBuilder,
    patch: StringBuilder,
    source_component: StringDictionaryBuilder<Int32Type>,
    source_host: StringDictionaryBuilder<Int32Type>,
}

impl Default for DecisionColumns {
    fn default() -> Self {
        DecisionColumns {
            index: UInt64Builder::new(),
            action: StringDictionaryBuilder::new(),
            name: StringBuilder::new(),
            count: Int32Builder::new(),
            message: StringBuilder::new(),
            patch: StringBuilder::new(),
            source_component: StringDictionaryBuilder::new(),
            source_host: StringDictionaryBuilder::new(),
        }
    }
}

impl DecisionColumns {
    /// One decision; `event` is `(name, count, message)` of the event written (None for a skip), `source`
    /// the input event's component and host.
    pub fn push(
        &mut self,
        index: u64,
        action: Action,
        event: Option<(&str, i32, &str)>,
        patch: Option<&str>,
        (component, host): (&str, &str),
    ) {
        self.index.append_value(index);
        self.action.append_value(action.as_str());
        self.name.append_option(event.map(|e| e.0));
        self.count.append_option(event.map(|e| e.1));
        self.message.append_option(event.map(|e| e.2));
        self.patch.append_option(patch);
        self.source_component.append_value(component);
        self.source_host.append_value(host);
    }

    /// The decision `sim` just made.
    pub fn push_step(&mut self, step: &Step, sim: &Simulator) {
        let e = sim.event();
        let event = (step.action != Action::Skip).then_some((e.metadata.name.as_str(), e.count, e.message.as_str()));
        let patch = sim.patch().map(String::from_utf8_lossy);
        self.push(step.index, step.action, event, patch.as_deref(), (&e.source.component, &e.source.host));
    }

    pub fn finish(mut self) -> RecordBatch {
        const NULLABLE: [&str; 4] = ["name", "count", "message", "patch"];
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("index", Arc::new(self.index.finish())),
            ("action", Arc::new(self.action.finish())),
            ("name", Arc::new(self.name.finish())),
            ("count", Arc::new(self.count.finish())),
            ("message", Arc::new(self.message.finish())),
            ("patch", Arc::new(self.patch.finish())),
            ("source_component", Arc::new(self.source_component.finish())),
            ("source_host", Arc::new(self.source_host.finish())),
        ];
        let schema = Schema::new(
            columns
                .iter()
                .map(|(n, a)| Field::new(*n, a.data_type().clone(), NULLABLE.contains(n)))
                .collect::<Vec<_>>(),
        );
        // Every column got one value per push.
        RecordBatch::try_new(Arc::new(schema), columns.into_iter().map(|(_, a)| a).collect())
            .expect("columns of equal length")
    }
}

/// Rows of any serializable struct (the metrics rows) as columns, one per field in the order the first row
/// that has it names it: unsigned integers as uint64, other integers as int64, other numbers as float64,
/// strings as utf8; a field a row leaves out is null there.
pub fn rows_to_batch<T: serde::Serialize>(rows: &[T]) -> Result<RecordBatch> {
    use serde_json::Value;
    let mut names: Vec<String> = Vec::new();
    let mut maps = Vec::with_capacity(rows.len());
    for row in rows {
        let text = serde_json::to_string(row).map_err(|e| Error::value("", e.to_string()))?;
        // The text keeps the struct's field order, which the parsed map (sorted) does not.
        let keys: KeysInOrder = serde_json::from_str(&text).map_err(|e| Error::value("", e.to_string()))?;
        for k in keys.0 {
            if !names.contains(&k) {
                names.push(k);
            }
        }
        // Values straight from the row: a float read back from text may differ in its last bit.
        let Value::Object(map) = serde_json::to_value(row).map_err(|e| Error::value("", e.to_string()))? else {
            return Err(Error::value("", "a row must serialize as a map"));
        };
        maps.push(map);
    }
    let mut fields = Vec::with_capacity(names.len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(names.len());
    for name in &names {
        let values: Vec<Option<&Value>> = maps.iter().map(|m| m.get(name).filter(|v| !v.is_null())).collect();
        let present = || values.iter().flatten();
        let column: ArrayRef = if present().all(|v| v.is_u64()) {
            Arc::new(values.iter().map(|v| v.and_then(Value::as_u64)).collect::<arrow_array::UInt64Array>())
        } else if present().all(|v| v.is_i64()) {
            Arc::new(values.iter().map(|v| v.and_then(Value::as_i64)).collect::<Int64Array>())
        } else if present().all(|v| v.is_number()) {
            Arc::new(values.iter().map(|v| v.and_then(Value::as_f64)).collect::<arrow_array::Float64Array>())
        } else if present().all(|v| v.is_string()) {
            Arc::new(values.iter().map(|v| v.and_then(Value::as_str)).collect::<arrow_array::StringArray>())
        } else {
            return Err(Error::type_(name.as_str(), "a column must hold numbers or strings"));
        };
        fields.push(Field::new(name.as_str(), column.data_type().clone(), column.null_count() > 0));
        columns.push(column);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| Error::value("", e.to_string()))
}

/// The keys of a JSON object in the order they are written.
struct KeysInOrder(Vec<String>);

impl<'de> serde::Deserialize<'de> for KeysInOrder {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct KeyNames;
        impl<'de> Visitor<'de> for KeyNames {
            type Value = KeysInOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<KeysInOrder, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, serde::de::IgnoredAny)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                    keys.push(k);
                }
                Ok(KeysInOrder(keys))
            }
        }
        d.deserialize_map(KeyNames)
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{StringArray, StringViewArray, TimestampMicrosecondArray};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> (Schema, RecordBatch) {
        let schema =
            Schema::new(columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect::<Vec<_>>());
        let batch =
            RecordBatch::try_new(Arc::new(schema.clone()), columns.into_iter().map(|(_, a)| a).collect()).unwrap();
        (schema, batch)
    }

    fn records(table: &Table) -> Result<Vec<Record<'static>>> {
        let mut out = Vec::new();
        table.each(|r| {
            out.push(r.clone().into_owned());
            Ok(true)
        })?;
        Ok(out)
    }

    #[test]
    fn rows_read_as_the_json_records_they_stand_for() {
        let dict: DictionaryArray<Int8Type> = vec![Some("Pod"), None].into_iter().collect();
        let (schema, b) = batch(vec![
            ("t_ns", Arc::new(Int64Array::from(vec![5, 6])) as ArrayRef),
            ("involved.kind", Arc::new(dict)),
            ("involved.name", Arc::new(StringViewArray::from(vec![Some("p-1"), Some("p-2")]))),
            ("reason", Arc::new(StringArray::from(vec![Some("BackOff"), None]))),
        ]);
        let got = records(&Table::new(&schema, vec![b]).unwrap()).unwrap();
        let want = |t_ns, kind: &str, name: &str, reason: &str| Record {
            t_ns,
            involved: InvolvedRecord {
                kind: kind.to_owned().into(),
                name: name.to_owned().into(),
                ..Default::default()
            },
            reason: reason.to_owned().into(),
            ..Default::default()
        };
        assert_eq!(got, vec![want(5, "Pod", "p-1", "BackOff"), want(6, "", "p-2", "")]);
    }

    #[test]
    fn string_values_are_checked_once_and_bad_ones_named() {
        use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
        fn strings<O: arrow_array::OffsetSizeTrait>(offsets: &[usize], data: &[u8]) -> ArrayRef {
            let offsets = offsets.iter().map(|&o| O::from_usize(o).unwrap()).collect::<Vec<O>>();
            // SAFETY: none; the arrays are deliberately invalid, which is what `Table::new` must catch.
            Arc::new(unsafe {
                arrow_array::GenericStringArray::<O>::new_unchecked(
                    OffsetBuffer::new_unchecked(ScalarBuffer::from(offsets)),
                    Buffer::from(data.to_vec()),
                    None,
                )
            })
        }
        let table = |message: ArrayRef| {
            let (schema, b) = batch(vec![
                ("t_ns", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
                ("involved.name", Arc::new(StringArray::from(vec!["a", "b"]))),
                ("message", message),
            ]);
            Table::new(&schema, vec![b])
        };
        let e = "é".as_bytes();
        let ok = [e, b"x"].concat();
        for good in [strings::<i32>(&[0, 2, 3], &ok), strings::<i64>(&[0, 2, 3], &ok)] {
            let t = table(good).unwrap();
            let messages: Vec<_> = records(&t).unwrap().into_iter().map(|r| r.message.into_owned()).collect();
            assert_eq!(messages, ["é", "x"]);
        }
        let bad = [
            (strings::<i32>(&[0, 2, 1], &ok), "offsets are negative or decreasing"),
            (strings::<i64>(&[0, 1, 3], &ok), "an offset splits a UTF-8 character"),
            (strings::<i32>(&[0, 1, 2], &[b'a', 0xff]), "invalid UTF-8"),
            (strings::<i32>(&[0, 1, 9], b"ab"), "Last offset 9"),
        ];
        for (column, why) in bad {
            let Err(err) = table(column) else { panic!("accepted: {why}") };
            let err = err.to_string();
            assert!(err.starts_with("message: invalid Arrow data: ") && err.contains(why), "{err}");
        }
    }

    #[test]
    fn a_stream_is_replayed_as_it_arrives_and_kept() {
        let (schema, b) = batch(vec![
            ("t_ns", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            ("involved.name", Arc::new(StringArray::from(vec!["a", "b", "c"]))),
        ]);
        let (_, null) = batch(vec![
            ("t_ns", Arc::new(Int64Array::from(vec![Some(4), None])) as ArrayRef),
            ("involved.name", Arc::new(StringArray::from(vec!["d", "e"]))),
        ]);
        let stream = |batches: Vec<Result<RecordBatch>>| {
            let mut it = batches.into_iter();
            move || it.next()
        };
        let mut seen = vec![];
        let t = Table::each_streamed(&schema, stream(vec![Ok(b.clone()), Ok(b.clone())]), |r| {
            seen.push(r.clone().into_owned());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, records(&Table::new(&schema, vec![b.clone(), b.clone()]).unwrap()).unwrap());
        assert_eq!(records(&t).unwrap(), seen, "the table kept replays the same");
        // A bad batch, or an error of the stream, ends the replay after the batches before it.
        let mut n = 0;
        let err = Table::each_streamed(&schema, stream(vec![Ok(b.clone()), Ok(null)]), |_| {
            n += 1;
            Ok(())
        })
        .err()
        .unwrap();
        assert_eq!((err.to_string(), n), ("row 4: t_ns: null (every record needs its time)".into(), 3));
        let failing = stream(vec![Ok(b.clone()), Err(Error::value("", "disk gone"))]);
        let err = Table::each_streamed(&schema, failing, |_| Ok(())).err().unwrap();
        assert_eq!(err.to_string(), "disk gone");
        // A replay that fails stops an endless stream's reader.
        let endless = move || Some(Ok(b.clone()));
        let err = Table::each_streamed(&schema, endless, |_| Err(Error::value("", "stop"))).err().unwrap();
        assert_eq!(err.to_string(), "stop");
    }

    #[test]
    fn timestamps_of_any_unit_become_nanoseconds_and_rows_count_across_batches() {
        let col = |v: Vec<Option<i64>>| Arc::new(TimestampMicrosecondArray::from(v)) as ArrayRef;
        let name = || Arc::new(StringArray::from(vec!["a"])) as ArrayRef;
        let (schema, b1) = batch(vec![("t_ns", col(vec![Some(7)])), ("involved.name", name())]);
        let (_, b2) = batch(vec![("t_ns", col(vec![None])), ("involved.name", name())]);
        let table = Table::new(&schema, vec![b1.clone()]).unwrap();
        assert_eq!(records(&table).unwrap()[0].t_ns, 7_000);
        let err = Table::new(&schema, vec![b1, b2]).err().unwrap();
        assert_eq!(err.to_string(), "row 1: t_ns: null (every record needs its time)");
        let (schema, b) = batch(vec![("t_ns", col(vec![Some(i64::MAX / 10)])), ("involved.name", name())]);
        let err = records(&Table::new(&schema, vec![b]).unwrap()).unwrap_err();
        assert!(err.to_string().starts_with("row 0: t_ns: out of range"), "{err}");
    }

    #[test]
    fn annotations_come_from_a_map_column() {
        let mut m = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        m.keys().append_value("k");
        m.values().append_value("v");
        m.append(true).unwrap();
        m.append(false).unwrap();
        let (schema, b) = batch(vec![
            ("t_ns", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            ("involved.name", Arc::new(StringArray::from(vec!["a", "b"]))),
            ("annotations", Arc::new(m.finish())),
        ]);
        let got = records(&Table::new(&schema, vec![b]).unwrap()).unwrap();
        assert_eq!(got[0].annotations, BTreeMap::from([("k".to_owned(), "v".to_owned())]));
        assert!(got[1].annotations.is_empty());
    }

    #[test]
    fn wrong_unknown_and_missing_columns_are_named() {
        let t = || Arc::new(Int64Array::from(vec![1])) as ArrayRef;
        let s = || Arc::new(StringArray::from(vec!["x"])) as ArrayRef;
        let err = |cols| Layout::new(&batch(cols).0).unwrap_err().to_string();
        assert!(err(vec![("t_ns", t()), ("involved.nmae", s())]).starts_with("involved.nmae: unknown trace column"));
        assert_eq!(
            err(vec![("t_ns", s()), ("involved.name", s())]),
            "t_ns: expected int64 nanoseconds or a timestamp, got Utf8"
        );
        assert_eq!(err(vec![("t_ns", t()), ("reason", t())]), "reason: expected a string column, got Int64");
        assert_eq!(err(vec![("involved.name", s())]), "t_ns: missing column (every record needs its time)");
        assert_eq!(
            err(vec![("t_ns", t()), ("reason", s())]),
            "involved: missing columns: a trace needs at least one involved.* column"
        );
    }

    #[test]
    fn records_round_trip_through_a_batch() {
        let mut a = Record {
            t_ns: 3,
            source_component: "kubelet".into(),
            involved: InvolvedRecord { kind: "Pod".into(), name: "p".into(), ..Default::default() },
            message: "m".into(),
            ..Default::default()
        };
        let b = Record { t_ns: 4, ..a.clone() };
        a.annotations.insert("k".into(), "v".into());
        let batch = records_to_batch(&[a.clone(), b.clone()]);
        let table = Table::new(&batch.schema(), vec![batch]).unwrap();
        assert_eq!(records(&table).unwrap(), vec![a, b]);
    }

    #[test]
    fn decisions_become_columns() {
        use crate::correlator::{CorrelatorOptions, KeyFuncs};
        let r = Record {
            t_ns: 1_700_000_000_000_000_000,
            involved: InvolvedRecord { kind: "Pod".into(), name: "p".into(), ..Default::default() },
            reason: "BackOff".into(),
            message: "m".into(),
            ..Default::default()
        };
        let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), false).unwrap();
        let mut cols = DecisionColumns::default();
        for _ in 0..2 {
            let step = sim.step(&r).unwrap();
            cols.push_step(&step, &sim);
        }
        cols.push(2, Action::Skip, None, None, ("kubelet", "node-1"));
        let b = cols.finish();
        assert_eq!(b.num_rows(), 3);
        let action = b.column(1).as_dictionary::<Int8Type>();
        let action = action.downcast_dict::<arrow_array::StringArray>().unwrap();
        use arrow_array::ArrayAccessor;
        assert_eq!([action.value(0), action.value(1), action.value(2)], ["create", "patch", "skip"]);
        assert_eq!(b.column(3).as_primitive::<Int32Type>().value(1), 2);
        assert!(b.column(5).is_null(0) && !b.column(5).is_null(1) && b.column(2).is_null(2));
    }

    #[test]
    fn serializable_rows_become_typed_columns() {
        #[derive(serde::Serialize)]
        struct Row {
            name: &'static str,
            n: u64,
            delta: i64,
            share: f64,
            #[serde(skip_serializing_if = "Option::is_none")]
            peak: Option<u64>,
        }
        let rows = [
            Row { name: "a", n: 1, delta: -1, share: 0.5, peak: Some(3) },
            Row { name: "b", n: 2, delta: 2, share: 1.0, peak: None },
        ];
        let b = rows_to_batch(&rows).unwrap();
        let names: Vec<_> = b.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["name", "n", "delta", "share", "peak"]);
        let types: Vec<_> = b.schema().fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(types, [DataType::Utf8, DataType::UInt64, DataType::Int64, DataType::Float64, DataType::UInt64]);
        assert_eq!(b.column(3).as_primitive::<arrow_array::types::Float64Type>().value(1), 1.0);
        assert!(b.column(4).is_null(1) && !b.column(4).is_null(0));
    }
}
