"""A Flask application: JSON, a form POST with a file upload, a redirect, a
404, and a streaming response (see gate.py)."""

import hashlib

from flask import Flask, Response, jsonify, redirect, request, stream_with_context

from gate import gated_chunks

app = Flask(__name__)


@app.get("/json")
def json_route():
    return jsonify(hello="world", args=request.args.to_dict(), script_name=request.script_root)


@app.post("/upload")
def upload():
    upload = request.files["file"]
    data = upload.read()
    return jsonify(
        name=request.form["name"],
        filename=upload.filename,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )


@app.post("/raw")
def raw_body():
    """The body as werkzeug reads it (`request.get_data()`), which for a
    chunked upload relies on the server's `wsgi.input_terminated`."""
    data = request.get_data()
    return jsonify(
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        chunked=request.headers.get("Transfer-Encoding") == "chunked",
        server_software=request.environ.get("SERVER_SOFTWARE"),
    )


@app.get("/redirect")
def go_elsewhere():
    return redirect("/json?from=redirect")


@app.get("/stream")
def stream():
    return Response(stream_with_context(gated_chunks(request.args["gate"])), mimetype="text/plain")


def create_app():
    """The factory shape (`--factory flask_app:create_app`)."""
    made = Flask("made_by_factory")

    @made.get("/")
    def index():
        return "made by the factory"

    return made
