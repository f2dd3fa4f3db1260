"""Fuzzing the decoders and the HTTP/WebSocket app (hypothesis, atheris), and saved crashes."""
