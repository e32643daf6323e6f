"""Writes one gRPC-framed Execute request (the built-in echo) to the file
named by the first argument, the body h2load sends in benches/*_ab.sh."""
import sys


def field(number, text):
    data = text.encode()
    return bytes([number << 3 | 2, len(data)]) + data


body = field(1, "echo") + field(2, '{"message": "hello", "n": 42}')
with open(sys.argv[1], "wb") as out:
    out.write(b"\0" + len(body).to_bytes(4, "big") + body)
