"""Schema versions this package reads, and the error it raises otherwise.

Two versions, each raised by DriftBench when a reader must change:
  - the store's (SQLite PRAGMA user_version; PostgreSQL driftbench_meta's
    'schema_version' row), DRIFT_STORE_SCHEMA_VERSION in
    include/driftbench/store.h. This package reads versions 1 to
    STORE_SCHEMA_VERSION: a table a later version added reads as empty in
    an older store, as the C readers do.
  - the JSON documents' (their first key, "schema_version"),
    DRIFT_JSON_SCHEMA_VERSION in include/driftbench/report.h
    (docs/json-schema.md). Exactly JSON_SCHEMA_VERSION.
"""

STORE_SCHEMA_VERSION = 3
JSON_SCHEMA_VERSION = 1
STORE_APPLICATION_ID = 0x44524654  # "DRFT"


class SchemaError(ValueError):
    """A store or JSON document whose schema version this package does not read."""


def check_store_version(version, where):
    """Raise SchemaError unless `version` (an int, or None when the store has
    no DriftBench marks) is one this package reads."""
    if version is None:
        raise SchemaError(f"{where}: not a DriftBench store (no DriftBench schema version)")
    if version < 1:
        raise SchemaError(f"{where}: an empty DriftBench store (schema version {version}): nothing was written to it")
    if version > STORE_SCHEMA_VERSION:
        raise SchemaError(
            f"{where}: store schema version {version} is newer than this package reads "
            f"(1..{STORE_SCHEMA_VERSION}); upgrade the driftbench Python package"
        )
    return version


def check_json_version(doc, where):
    """Raise SchemaError unless `doc` is a DriftBench JSON document of
    JSON_SCHEMA_VERSION."""
    if not isinstance(doc, dict):
        raise SchemaError(f"{where}: not a DriftBench JSON document (a JSON object expected, got {type(doc).__name__})")
    if "schema_version" not in doc:
        raise SchemaError(
            f"{where}: no \"schema_version\": written by a DriftBench older than JSON schema "
            f"{JSON_SCHEMA_VERSION}, or not DriftBench output"
        )
    v = doc["schema_version"]
    if not isinstance(v, int) or isinstance(v, bool) or v != JSON_SCHEMA_VERSION:
        raise SchemaError(
            f"{where}: JSON schema version {v!r}; this package reads version {JSON_SCHEMA_VERSION} "
            f"(docs/json-schema.md)"
        )
    return v
