"""`/mcp` `tools/call` round trip of a running `mpagent serve` (issue 33's ≤ 3 ms p50 target).

Usage: python3 mcp_roundtrip.py http://127.0.0.1:PORT ADMIN_TOKEN [CALLS] [WARMUP]

One keep-alive connection, one MCP session (initialize + notifications/initialized), then
`tools/call` of `test_echo` (serve with MPA_ENABLE_TEST_TOOLS=true) CALLS times after WARMUP
untimed calls; prints p50/p90/p99 in ms. Raw http.client, so the client's own cost is small.
"""

import http.client
import json
import sys
import time
import urllib.parse

base, token = sys.argv[1], sys.argv[2]
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 250
warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 50
url = urllib.parse.urlparse(base)
conn = http.client.HTTPConnection(url.hostname, url.port)
headers = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "x-api-key": token,
}


def post(body):
    conn.request("POST", "/mcp", json.dumps(body), headers)
    resp = conn.getresponse()
    data = resp.read()
    if resp.status >= 300:
        raise SystemExit(f"HTTP {resp.status}: {data[:200]!r}")
    return resp, data


resp, _ = post(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
)
headers["mcp-session-id"] = resp.getheader("mcp-session-id")
headers["mcp-protocol-version"] = "2025-06-18"
post({"jsonrpc": "2.0", "method": "notifications/initialized"})

times = []
for i in range(warmup + calls):
    body = {
        "jsonrpc": "2.0",
        "id": i + 1,
        "method": "tools/call",
        "params": {"name": "test_echo", "arguments": {"text": "ping"}},
    }
    start = time.perf_counter()
    _, data = post(body)
    elapsed = time.perf_counter() - start
    if b"ping" not in data:
        raise SystemExit(f"unexpected answer: {data[:200]!r}")
    if i >= warmup:
        times.append(elapsed * 1000)
times.sort()


def pct(p):
    return times[min(len(times) - 1, int(p / 100 * len(times)))]


print(f"calls {len(times)}: p50 {pct(50):.2f} ms, p90 {pct(90):.2f} ms, p99 {pct(99):.2f} ms")
