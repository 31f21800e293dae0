import threading
import time

from inference.experiments.shared_results import SharedResults


def test_computes_once_for_concurrent_callers():
    shared, calls = SharedResults(), []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return 42

    out = []
    threads = [threading.Thread(target=lambda: out.append(shared.get_or_compute("k", slow)))
               for _ in range(5)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert out == [42] * 5 and len(calls) == 1
    assert shared.get("k") == 42 and shared.get("other") is None
