//! The Python binding's one C file (`src/py/guard.c`, see there why); the Rust core needs none.
fn main() {
    println!("cargo::rerun-if-changed=src/py/guard.c");
    // Set when the binding calls Python through guard.c.
    println!("cargo::rustc-check-cfg=cfg(exit_shim)");
    #[cfg(feature = "python")]
    exit_shim();
}

/// Builds guard.c for the Pythons that end a thread taking the GIL during finalization: from 3.14 CPython
/// parks such a thread itself. The version is the one the extension is built for (its oldest under abi3).
#[cfg(feature = "python")]
fn exit_shim() {
    use pyo3_build_config::PythonVersion;
    if pyo3_build_config::get().version() < (PythonVersion { major: 3, minor: 14 }) {
        println!("cargo::rustc-cfg=exit_shim");
        // Without -fexceptions, glibc's pthread_cleanup_push takes the setjmp form that stops the unwinding.
        cc::Build::new().file("src/py/guard.c").flag("-fno-exceptions").compile("kubevents_guard");
    }
}
