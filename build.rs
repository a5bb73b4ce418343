//! The Python binding's one C file (`src/py/guard.c`, see there why); the Rust core needs none.
fn main() {
    println!("cargo::rerun-if-changed=src/py/guard.c");
    if std::env::var_os("CARGO_FEATURE_PYTHON").is_some() {
        // Without -fexceptions, glibc's pthread_cleanup_push takes the setjmp form that stops the unwinding.
        cc::Build::new().file("src/py/guard.c").flag("-fno-exceptions").compile("kubevents_guard");
    }
}
