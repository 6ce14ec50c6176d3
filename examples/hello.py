import platform

print(f"hello from a sandboxed Python {platform.python_version()}")
