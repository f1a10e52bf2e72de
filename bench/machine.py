"""What the benchmark reports say about the machine they ran on (shared by bench/*/ reports)."""
import platform


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, or what Python knows, or "unknown"."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def read_text(path):
    """The text of a small file the benchmark script wrote (a load average), or "?"."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "?"
