import m0serve_no_such_dependency  # noqa: F401
