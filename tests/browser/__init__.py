"""Tests in a real headless Chromium over the DevTools protocol: the web console; the shared client (devtools.py)."""
