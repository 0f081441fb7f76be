"""A loopback HTTP server that answers every request alike, with an answer that is not AWS's (a
proxy's page, a wrong URL's 404, a web server's JSON): for the tests of the one boto3 wrapper."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def answer_handler(status: int, content_type: str, body: bytes) -> type[BaseHTTPRequestHandler]:
    """A request handler that reads the request and answers with ``body``, whatever was asked."""

    class Answer(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Answer


@contextmanager
def answering_server(status: int, content_type: str, body: bytes) -> Iterator[str]:
    """The URL of a loopback server giving that answer to every request, while in the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), answer_handler(status, content_type, body))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
