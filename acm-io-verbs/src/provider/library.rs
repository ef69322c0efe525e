//! Finding and opening provider libraries: every regular `*.so` file of
//! `provider_lib_path` (symbolic links skipped, as the reference's `lstat` check does),
//! `dlopen`ed lazily, asked for its `struct acm_provider` through `provider_query`, and
//! kept only if it speaks interface version 1 with our structure size.

use super::abi::{ACM_PROV_VERSION, AcmProvider, ProviderQueryFn};
use super::error::LoadError;
use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// A loaded provider library and the callback table it handed over.
///
/// A library, once opened, is never unloaded, even when it is refused or this value
/// drops: its constructor may have started threads (libibacmp's do) that would run on
/// in unmapped code. Not `Send`: the callbacks are called from the daemon's event-loop
/// thread only.
pub struct ProviderLibrary {
    path: PathBuf,
    name: String,
    table: NonNull<AcmProvider>,
    lib: ManuallyDrop<libloading::Library>,
}

impl std::fmt::Debug for ProviderLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderLibrary")
            .field("path", &self.path)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ProviderLibrary {
    /// The name the provider reports (`provider` lines select it by this name).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file it was loaded from.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the library calls verbs itself (its dependencies bring `libibverbs`):
    /// such a provider needs a real `acm_device.verbs`, and would crash on the null one
    /// of a fabric without verbs.
    #[must_use]
    pub fn uses_verbs(&self) -> bool {
        // SAFETY: only the symbol's presence is looked at; it is never called. `dlsym`
        // on the library's handle searches the library and its dependencies only.
        unsafe {
            self.lib
                .get::<*const std::ffi::c_void>(b"ibv_query_device\0")
        }
        .is_ok()
    }

    pub(crate) fn table(&self) -> &AcmProvider {
        // SAFETY: `table` came non-null from `provider_query`, which hands out a
        // provider structure that lives as long as the library, which is never
        // unloaded.
        unsafe { self.table.as_ref() }
    }

    /// Opens one file: `dlopen`, `provider_query`, version and size checks.
    ///
    /// # Errors
    /// Every reason the file is not a usable provider, naming the file.
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        // SAFETY: loading a shared object runs its initialisers. The files come from the
        // administrator's provider directory, exactly what the reference loads the same
        // way; a library that misbehaves in its constructor is beyond any check here.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| LoadError::Open {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        let lib = ManuallyDrop::new(lib);
        // SAFETY: the symbol is declared by acm_prov.h with exactly this signature.
        let query: libloading::Symbol<'_, ProviderQueryFn> =
            unsafe { lib.get(b"provider_query\0") }.map_err(|e| LoadError::NoQuery {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        let mut table: *const AcmProvider = std::ptr::null();
        let mut version: u32 = 0;
        // SAFETY: both out-pointers are valid for writes of their types for the call.
        let ret = unsafe { query(&raw mut table, &raw mut version) };
        let Some(table) = NonNull::new(table.cast_mut()).filter(|_| ret == 0) else {
            return Err(LoadError::QueryFailed {
                path: path.to_owned(),
                ret,
                null: table.is_null(),
            });
        };
        if version != ACM_PROV_VERSION {
            return Err(LoadError::Version {
                path: path.to_owned(),
                found: version,
                expected: ACM_PROV_VERSION,
            });
        }
        // The size field comes first, so it can be read even from a provider whose
        // structure is smaller than ours.
        // SAFETY: `table` is non-null and points at the provider's structure, which
        // starts with `size_t size` whatever its version.
        let size = unsafe { table.cast::<usize>().read() };
        let expected = std::mem::size_of::<AcmProvider>();
        if size != expected {
            return Err(LoadError::Size {
                path: path.to_owned(),
                found: size,
                expected,
            });
        }
        // SAFETY: the size matches ours, so the whole structure is there.
        let name_ptr = unsafe { table.as_ref() }.name;
        let name = if name_ptr.is_null() {
            None
        } else {
            // SAFETY: a non-null name is a NUL-terminated string in the library's data.
            unsafe { CStr::from_ptr(name_ptr) }.to_str().ok()
        };
        let Some(name) = name.filter(|n| !n.is_empty()).map(str::to_owned) else {
            return Err(LoadError::Name {
                path: path.to_owned(),
            });
        };
        Ok(Self {
            path: path.to_owned(),
            name,
            table,
            lib,
        })
    }
}

/// The files [`scan`] considers: regular `*.so` files, symbolic links refused with a
/// reason, in name order (the reference takes `readdir` order, which no file system
/// promises; name order makes "first loaded wins" reproducible).
///
/// # Errors
/// The directory cannot be listed.
pub fn candidates(dir: &Path) -> Result<Vec<Result<PathBuf, LoadError>>, LoadError> {
    let read = std::fs::read_dir(dir).map_err(|source| LoadError::ReadDir {
        path: dir.to_owned(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "so"))
        .collect();
    paths.sort();
    Ok(paths
        .into_iter()
        .map(|path| {
            let meta = std::fs::symlink_metadata(&path);
            let what = match &meta {
                Ok(m) if m.file_type().is_file() => return Ok(path),
                Ok(m) if m.file_type().is_symlink() => "a symbolic link",
                Ok(m) if m.file_type().is_dir() => "a directory",
                Ok(_) => "a special file",
                Err(_) => "gone",
            };
            Err(LoadError::NotRegular { path, what })
        })
        .collect())
}

/// Loads every provider of `dir`: one result per candidate file, in name order.
///
/// # Errors
/// The directory cannot be listed.
pub fn scan(dir: &Path) -> Result<Vec<Result<ProviderLibrary, LoadError>>, LoadError> {
    Ok(candidates(dir)?
        .into_iter()
        .map(|c| c.and_then(|p| ProviderLibrary::open(&p)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory removed on drop.
    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("acm-prov-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    #[test]
    fn only_regular_so_files_are_candidates() {
        let d = scratch("cand");
        std::fs::write(d.0.join("b.so"), b"x").unwrap();
        std::fs::write(d.0.join("a.txt"), b"x").unwrap();
        std::fs::create_dir(d.0.join("dir.so")).unwrap();
        std::os::unix::fs::symlink(d.0.join("b.so"), d.0.join("a.so")).unwrap();
        let c = candidates(&d.0).unwrap();
        let shown: Vec<String> = c
            .iter()
            .map(|r| match r {
                Ok(p) => p.file_name().unwrap().to_string_lossy().into_owned(),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(shown.len(), 3, "{shown:?}");
        assert!(shown[0].ends_with("a.so: skipped, not a regular file (a symbolic link)"));
        assert_eq!(shown[1], "b.so");
        assert!(shown[2].ends_with("dir.so: skipped, not a regular file (a directory)"));
    }

    #[test]
    fn a_file_that_is_not_a_shared_object_is_refused_with_its_name() {
        let d = scratch("bad");
        std::fs::write(d.0.join("junk.so"), b"not an ELF file").unwrap();
        let r = scan(&d.0).unwrap();
        let e = r.into_iter().next().unwrap().unwrap_err();
        assert!(matches!(e, LoadError::Open { .. }), "{e}");
        assert!(e.to_string().contains("junk.so: cannot load"), "{e}");
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let e = candidates(Path::new("/nonexistent/acm-prov-dir")).unwrap_err();
        assert!(e.to_string().contains("cannot read the provider directory"));
    }
}
