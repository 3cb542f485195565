"""Loading the application (issue 3, point 2) and the command line of the
Python entry: every failure is one line naming the target and exit 2 (with
the traceback only when the app's own code raised); the ways of naming an
app that must work, work."""

from __future__ import annotations

import signal
from importlib.metadata import version as dist_version

import pytest
import requests

from helpers import APPS, run_m0serve

def refused(*args: str, cwd=None, env=None):
    """m0serve with `args` must exit 2 without serving; returns its stderr lines."""
    done = run_m0serve("--port=0", f"--app-dir={APPS}", *args, cwd=cwd, env=env)
    assert done.returncode == 2, f"{args}: exit {done.returncode}\n{done.stderr}"
    assert "listening on" not in done.stderr
    assert "panicked" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("m0serve: error: "), done.stderr
    return lines


def one_line(*args: str, **kw) -> str:
    """The single stderr line of a refused command (no traceback)."""
    lines = refused(*args, **kw)
    assert len(lines) == 1, f"{args}: want one line, got:\n" + "\n".join(lines)
    return lines[0]


def test_a_missing_module_is_one_line_naming_the_target():
    line = one_line("m0serve_no_such_module:app")
    assert "'m0serve_no_such_module:app'" in line
    assert "no module named 'm0serve_no_such_module'" in line


def test_a_missing_package_is_one_line_naming_the_package():
    line = one_line("m0serve_no_such_pkg.wsgi:app")
    assert "'m0serve_no_such_pkg.wsgi:app'" in line
    assert "no module named 'm0serve_no_such_pkg'" in line


def test_a_missing_attribute_is_one_line():
    line = one_line("plain:no_such_app")
    assert "'plain:no_such_app'" in line and "has no attribute 'no_such_app'" in line
    line = one_line("plain:holder.inner.nope")
    assert "has no attribute 'holder.inner.nope'" in line


def test_an_object_that_is_not_callable_is_one_line():
    line = one_line("plain:not_callable")
    assert "'plain:not_callable'" in line and "not callable" in line and "str" in line
    # --interface auto (the default) refuses only this: what is not callable.
    assert "not an application" in line
    assert "not a WSGI application" in one_line("--interface", "wsgi", "plain:not_callable")


def test_the_not_callable_line_names_the_interface_asked_for():
    line = one_line("--interface", "asgi", "plain:not_callable")
    assert "not an ASGI application" in line and "WSGI" not in line
    returned = one_line("--factory", "plain:holder", env={"M0SERVE_INTERFACE": "asgi"})
    assert "returned" in returned and "not an ASGI application" in returned


def test_an_import_that_raises_prints_the_traceback_then_one_line():
    lines = refused("import_raises:app")
    text = "\n".join(lines)
    assert lines[0].startswith("Traceback (most recent call last):"), text
    assert "import_raises.py" in text
    assert "ValueError: this module fails to import" in text
    assert "'import_raises:app'" in lines[-1] and "raised" in lines[-1], text


def test_a_missing_dependency_of_the_app_is_an_import_that_raises():
    # The module exists; what it imports does not: that is the app's bug, with its traceback.
    lines = refused("import_missing_dep:app")
    text = "\n".join(lines)
    assert lines[0].startswith("Traceback"), text
    assert "m0serve_no_such_dependency" in text
    assert "'import_missing_dep:app'" in lines[-1]


def test_factory_failures():
    assert "not callable" in one_line("--factory", "plain:not_callable")
    returned = one_line("--factory", "plain:holder")
    assert "returned" in returned and "not callable" in returned
    lines = refused("--factory", "plain:failing_factory")
    assert "RuntimeError: the factory failed on purpose" in "\n".join(lines)
    assert "'plain:failing_factory'" in lines[-1] and "factory raised" in lines[-1]


def test_asgi_loading_errors_are_one_line_too():
    line = one_line("--interface", "asgi", "m0serve_no_such_module:app")
    assert "no module named 'm0serve_no_such_module'" in line
    line = one_line("plain:no_such_attr", env={"M0SERVE_INTERFACE": "asgi"})
    assert "has no attribute 'no_such_attr'" in line


def test_a_missing_or_malformed_app_is_one_line():
    assert "missing the APP" in one_line()
    assert "is not module:attribute" in one_line("plain")
    assert "is not module:attribute" in one_line("plain:hello:extra")


def test_missing_directories_are_one_line(tmp_path):
    missing = tmp_path / "missing"
    assert "--working-dir" in one_line(f"--working-dir={missing}", "plain:hello")
    assert "--app-dir" in one_line(f"--app-dir={missing}", "plain:hello")


def test_version_through_python_m_and_the_console_script():
    expected = dist_version("m0serve")
    import m0serve

    assert m0serve.__version__ == expected
    for python_m in (True, False):
        done = run_m0serve("--version", python_m=python_m)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"m0serve {expected}"


def test_help_names_the_program_and_the_app_flags():
    done = run_m0serve("--help", python_m=True)
    assert done.returncode == 0, done.stderr
    assert "Usage: m0serve" in done.stdout
    for flag in ("[APP]", "--interface", "--factory", "--app-dir", "--working-dir",
                 "--blocking-threads", "--backpressure", "--root-path"):
        assert flag in done.stdout, flag


def get_text(server, path: str) -> str:
    r = requests.get(server.url + path, timeout=10)
    assert r.status_code == 200, r.text
    return r.text


def test_dotted_attributes_and_factories_serve(serve):
    assert get_text(serve("plain:holder.inner.app"), "/dotted") == "hello from /dotted"
    assert get_text(serve("--factory", "plain:make_hello"), "/made") == "hello from /made"
    assert get_text(serve("--factory", "flask_app:create_app"), "/") == "made by the factory"


def test_the_app_dir_defaults_to_the_current_directory(serve):
    # No --app-dir: the console script's own directory is sys.path[0], not
    # the current one, so only the default puts `plain` within reach.
    server = serve("plain:hello", cwd=APPS, app_dir=None)
    assert get_text(server, "/x") == "hello from /x"


def test_the_app_dir_comes_from_the_environment(serve, tmp_path):
    server = serve("plain:hello", cwd=tmp_path, app_dir=None, env={"M0SERVE_APP_DIR": str(APPS)})
    assert get_text(server, "/env") == "hello from /env"


def test_working_dir_changes_directory_before_the_import(serve, tmp_path):
    (tmp_path / "marker.txt").write_text("the marker\n")
    server = serve(f"--working-dir={tmp_path}", "plain:cwd")
    cwd, marker = get_text(server, "/").split("\n")
    assert cwd == str(tmp_path.resolve()) and marker == "the marker"
    # A relative --app-dir is taken from the working directory.
    relative = serve(f"--working-dir={APPS.parent}", "plain:hello", app_dir="apps")
    assert get_text(relative, "/rel") == "hello from /rel"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_server_cleanly(serve, sig):
    server = serve("plain:hello")
    assert get_text(server, "/") == "hello from /"
    assert server.stop(sig) == 0, server.output
    name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    assert f"{name}: shutting down" in server.output
    assert "Traceback" not in server.output and "KeyboardInterrupt" not in server.output, server.output
