//! Arrow tables across the boundary through the Arrow PyCapsule interface (`__arrow_c_stream__`): pyarrow,
//! polars and any other producer hand over record batches without a Python object per row, and results go
//! back the same way, so `pyarrow.table(x)` and `polars.from_arrow(x)` take them without a copy.

use std::ffi::CStr;
use std::sync::Arc;

use arrow_array::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use arrow_array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow_schema::SchemaRef;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::sim::table::{records_to_batch, Layout, Table};

const STREAM: &CStr = c"arrow_array_stream";

/// Whether `obj` offers the Arrow C stream interface (a table rather than a path or an iterable).
pub fn is_table(obj: &Bound<'_, PyAny>) -> bool {
    obj.hasattr(pyo3::intern!(obj.py(), "__arrow_c_stream__")).unwrap_or(false)
}

/// A trace table from any object with `__arrow_c_stream__`, its columns checked (`kubevents.traces`).
pub fn table_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Table> {
    let reader = stream_from_py(obj)?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(arrow_err)?;
    Ok(Table::new(&schema, batches)?)
}

/// The Arrow C stream of `obj`, not read yet.
pub fn stream_from_py(obj: &Bound<'_, PyAny>) -> PyResult<ArrowArrayStreamReader> {
    let capsule = obj.call_method1(pyo3::intern!(obj.py(), "__arrow_c_stream__"), (obj.py().None(),))?;
    let capsule = capsule.cast_into::<PyCapsule>().map_err(|_| {
        PyTypeError::new_err("__arrow_c_stream__() did not return a PyCapsule (an Arrow C stream was expected)")
    })?;
    let ptr = capsule.pointer_checked(Some(STREAM))?.cast::<FFI_ArrowArrayStream>();
    // SAFETY: the capsule holds an `ArrowArrayStream` (its name says so); `from_raw` moves the stream out and
    // leaves a released one behind, which the capsule's destructor then ignores, as the interface requires.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr()) };
    ArrowArrayStreamReader::try_new(stream).map_err(arrow_err)
}

fn arrow_err(e: arrow_schema::ArrowError) -> PyErr {
    arrow_error(e).into()
}

pub fn arrow_error(e: arrow_schema::ArrowError) -> crate::error::Error {
    crate::error::Error::value("", format!("reading the Arrow stream failed: {e}"))
}

/// Record batches made in Rust, offered to Python as an Arrow C stream (as often as asked).
#[pyclass(module = "kubevents", name = "ArrowTable", frozen)]
pub struct PyArrowTable {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl PyArrowTable {
    pub fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        PyArrowTable { schema, batches }
    }
}

#[pymethods]
impl PyArrowTable {
    /// The Arrow PyCapsule interface: a stream of the table's record batches. Casting to a requested
    /// schema is not offered; the producer's schema is returned, which the protocol allows.
    #[pyo3(signature = (requested_schema=None))]
    pub fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        drop(requested_schema);
        let reader = RecordBatchIterator::new(self.batches.clone().into_iter().map(Ok), Arc::clone(&self.schema));
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, STREAM)
    }

    fn __len__(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    fn __repr__(&self) -> String {
        let columns: Vec<_> = self.schema.fields().iter().map(|f| f.name().as_str()).collect();
        format!("ArrowTable(rows={}, columns={columns:?})", self.__len__())
    }
}

/// `kubevents.traces.to_arrow` from records: the records read and checked as `simulate` reads them, then
/// laid out in columns in Rust.
#[pyfunction]
pub fn _records_table(py: Python<'_>, trace: &Bound<'_, PyAny>) -> PyResult<PyArrowTable> {
    let records = super::sim::Trace::from_py(trace)?.records(py)?;
    let batch = super::lifecycle::detach(py, || records.collect().map(|r| records_to_batch(&r)))?;
    Ok(PyArrowTable::new(batch.schema(), vec![batch]))
}

/// Checks a table as `simulate` would before replaying it: its columns' names and types, and with `data` its
/// values too (which reads them all; the replay checks them anyway).
#[pyfunction]
#[pyo3(signature = (table, *, data))]
pub fn _check_table(table: &Bound<'_, PyAny>, data: bool) -> PyResult<()> {
    if data {
        return table_from_py(table).map(drop);
    }
    Layout::new(&stream_from_py(table)?.schema())?;
    Ok(())
}
