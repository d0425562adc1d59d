# rec_server.py PORTFILE LOG: a recording server for the e2e tests (request_control.sh,
# matrix_request_control.sh): answers OpenAI-shaped JSON to every POST (chat
# or completions) and logs each (path, headers, body) as a JSON line in LOG;
# writes "PORT n" to PORTFILE once it listens on 127.0.0.1.
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
log = open(sys.argv[2], "a")
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        log.write(json.dumps({"path": self.path, "headers": list(self.headers.items()), "body": json.loads(body)}) + "\n")
        log.flush()
        if self.path.endswith("/chat/completions"):
            ch = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        else:
            ch = {"index": 0, "text": "ok", "finish_reason": "stop"}
        out = json.dumps({"choices": [ch], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write("PORT %d\n" % srv.server_address[1])
srv.serve_forever()
