"""DriftBench from Python (docs/python.md): a store and the CLI's JSON
(compare, runs list/show, version) into pandas, and the C library's
compare and gate through ctypes."""

from .library import DriftError, Library
from .report import Comparison, read_compare, read_run, read_runs, read_version
from .schema import JSON_SCHEMA_VERSION, STORE_SCHEMA_VERSION, SchemaError
from .store import Store, open_store

__all__ = ["open_store", "Store", "read_compare", "Comparison", "read_runs", "read_run", "read_version",
           "Library", "DriftError", "SchemaError", "STORE_SCHEMA_VERSION", "JSON_SCHEMA_VERSION"]
__version__ = "0.1.0"
