"""--log-config: Python's logging configured in each worker before the
application is imported, as uvicorn does it (dictConfig from JSON or YAML,
fileConfig from INI), and which of the server's loggers the file took over."""

from __future__ import annotations

import json
import logging
import logging.config

# The server's lines and the access log's, as Python's logging names them.
SERVER_LOGGERS = ("m0serve.error", "m0serve.access")


def configure(path: str) -> tuple[bool, bool]:
    """Apply the file at `path`; whether it configured m0serve.error and
    m0serve.access (a level or a handler of their own), which are then
    handed the server's lines."""
    if path.endswith(".json"):
        with open(path) as f:
            logging.config.dictConfig(json.load(f))
    elif path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError as e:
            raise RuntimeError(f"--log-config {path}: a YAML file needs PyYAML installed") from e
        with open(path) as f:
            logging.config.dictConfig(yaml.safe_load(f))
    else:
        logging.config.fileConfig(path, disable_existing_loggers=False)
    known = logging.root.manager.loggerDict

    def configured(name: str) -> bool:
        logger = known.get(name)
        return isinstance(logger, logging.Logger) and bool(logger.handlers or logger.level != logging.NOTSET)

    return configured(SERVER_LOGGERS[0]), configured(SERVER_LOGGERS[1])
