//! The exceptions the binding raises, named as python-rados names them,
//! and the translation of the client library's and the key-value store's
//! errors into them. A failure must never be turned into a value.

use loligo_client::ClientError;
use loligo_kv::KvError;
use loligo_monc::protocol::MonError;
use loligo_types::ops::OpError;
use loligo_types::MapError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    loligo,
    Error,
    PyException,
    "Base of every error Loligo raises."
);
create_exception!(
    loligo,
    ObjectNotFound,
    Error,
    "The object, pool or store does not exist (ENOENT)."
);
create_exception!(
    loligo,
    ObjectExists,
    Error,
    "The object exists already (EEXIST)."
);
create_exception!(
    loligo,
    NoData,
    Error,
    "The object has no such xattr (ENODATA)."
);
create_exception!(
    loligo,
    OperationCanceled,
    Error,
    "An assertion of a compound op failed (ECANCELED): nothing of it was applied."
);
create_exception!(
    loligo,
    InvalidArgumentError,
    Error,
    "The request is invalid (EINVAL): a bad name, size, range or argument."
);
create_exception!(loligo, NoSpace, Error, "An OSD is full (ENOSPC).");
create_exception!(
    loligo,
    TimedOut,
    Error,
    "The op did not finish within its timeout (ETIMEDOUT): it may or may not have been applied."
);
create_exception!(
    loligo,
    PermissionError,
    Error,
    "The connecting entity's caps do not allow this (EACCES)."
);
create_exception!(
    loligo,
    NotSupported,
    Error,
    "The OSDs have no such object class method, or do not support the request (EOPNOTSUPP)."
);
create_exception!(
    loligo,
    MethodRefused,
    Error,
    "An object class method refused the op (its code and reason in the message): nothing was applied."
);
create_exception!(
    loligo,
    IOError,
    Error,
    "Any other failure of the cluster (EIO)."
);
create_exception!(
    loligo,
    RadosStateError,
    Error,
    "The handle is not connected (or was shut down)."
);
create_exception!(loligo, IoctxStateError, Error, "The Ioctx was closed.");

/// Add the exception types to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("ObjectNotFound", py.get_type::<ObjectNotFound>())?;
    m.add("ObjectExists", py.get_type::<ObjectExists>())?;
    m.add("NoData", py.get_type::<NoData>())?;
    m.add("OperationCanceled", py.get_type::<OperationCanceled>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("NoSpace", py.get_type::<NoSpace>())?;
    m.add("TimedOut", py.get_type::<TimedOut>())?;
    m.add("PermissionError", py.get_type::<PermissionError>())?;
    m.add("NotSupported", py.get_type::<NotSupported>())?;
    m.add("MethodRefused", py.get_type::<MethodRefused>())?;
    m.add("IOError", py.get_type::<IOError>())?;
    m.add("RadosStateError", py.get_type::<RadosStateError>())?;
    m.add("IoctxStateError", py.get_type::<IoctxStateError>())?;
    Ok(())
}

/// An OSD's refusal as an exception.
pub fn op_err(e: OpError) -> PyErr {
    let msg = e.to_string();
    match e {
        OpError::NotFound | OpError::NoPool(_) => ObjectNotFound::new_err(msg),
        OpError::Exists => ObjectExists::new_err(msg),
        OpError::NoXattr(_) => NoData::new_err(msg),
        OpError::AssertFailed { .. } => OperationCanceled::new_err(msg),
        OpError::Invalid(_) | OpError::TooLarge { .. } => InvalidArgumentError::new_err(msg),
        OpError::NoSpace | OpError::Full { .. } => NoSpace::new_err(msg),
        OpError::Denied(_) => PermissionError::new_err(msg),
        OpError::NoMethod(_) | OpError::NotSupported(_) => NotSupported::new_err(msg),
        OpError::MethodRefused { .. } => MethodRefused::new_err(msg),
        OpError::Timeout(_) => TimedOut::new_err(msg),
        _ => IOError::new_err(msg),
    }
}

/// A monitor's refusal as an exception.
pub fn mon_err(e: MonError) -> PyErr {
    let msg = e.to_string();
    match e {
        MonError::NotFound(_) => ObjectNotFound::new_err(msg),
        MonError::Map(MapError::PoolExists(_)) => ObjectExists::new_err(msg),
        MonError::Map(MapError::NoSuchPool(_) | MapError::NoSuchProfile(_)) => {
            ObjectNotFound::new_err(msg)
        }
        MonError::Invalid(_) | MonError::Map(_) => InvalidArgumentError::new_err(msg),
        MonError::Denied(_) => PermissionError::new_err(msg),
        MonError::Timeout(_) => TimedOut::new_err(msg),
        MonError::Unsupported(_) => NotSupported::new_err(msg),
        _ => IOError::new_err(msg),
    }
}

/// A client library error as an exception.
pub fn client_err(e: ClientError) -> PyErr {
    match e {
        ClientError::Op(e) => op_err(e),
        ClientError::Mon(e) => mon_err(e),
        e @ ClientError::NoPool(_) => ObjectNotFound::new_err(e.to_string()),
        e @ ClientError::Timeout(..) => TimedOut::new_err(e.to_string()),
        e @ ClientError::Unreachable(_) => IOError::new_err(e.to_string()),
    }
}

/// A key-value store error as an exception.
pub fn kv_err(e: KvError) -> PyErr {
    let msg = e.to_string();
    match e {
        KvError::Op(e) => op_err(e),
        KvError::NoStore(_) => ObjectNotFound::new_err(msg),
        KvError::Exists(_) => ObjectExists::new_err(msg),
        KvError::Invalid(_) | KvError::NotSupported(_) => InvalidArgumentError::new_err(msg),
        KvError::Busy(_) => TimedOut::new_err(msg),
        KvError::Corrupt(_) | KvError::Client(_) => IOError::new_err(msg),
    }
}
