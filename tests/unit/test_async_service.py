"""
The asynchronous adapter's selection service without a trainer: the engine it serves, over the real connection the
rollout worker uses. Groups arrive in any order; a batch reaches the selector when its last group does; a group
counted twice is refused before anything changes; a restart hands out the pending batches first.
"""

import queue
import time
from multiprocessing.connection import Client

import numpy as np
import pytest

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.adapters.async_grpo import SelectionService
from trl_kgps.engine.engine import SelectionEngine


G, B = 4, 3


def service(version=lambda: 0, num_prompts=12):
    engine = SelectionEngine(KGPSSelector(num_prompts, KGPSConfig(), seed=0), B)
    return SelectionService(engine, KGPSConfig(), queue.Queue(), version, G)


def rewards(successes):
    """`(G, 1)`: `successes` completions of `G` right."""
    return np.array([[1.0]] * successes + [[0.0]] * (G - successes))


def test_groups_in_any_order_reach_the_selector_as_their_batch_with_the_rewards_of_their_prompt():
    versions = iter([5, 5, 5])
    served = service(version=lambda: next(versions))
    served._set_columns(["accuracy"])
    reference = KGPSSelector(12, KGPSConfig(), seed=0)
    batch_id, indices = served.choose()
    np.testing.assert_array_equal(indices, reference.select(B))
    s = {indices[0]: 1, indices[1]: 4, indices[2]: 0}
    for position in (2, 0):  # out of order, the batch not yet complete: nothing observed
        served.observe(batch_id, position, indices[position], 3, rewards(s[indices[position]]))
        assert served.engine.ledger.batches_scored == 0 and served.metrics_queue.empty()
    served.observe(batch_id, 1, indices[1], 4, rewards(s[indices[1]]))
    assert served.engine.ledger.batches_scored == 1 and not served.engine.ledger.pending
    reference.update(np.array(indices), np.array([s[i] for i in indices]), np.full(B, G))
    np.testing.assert_array_equal(served.engine.selector.mean, reference.mean)
    np.testing.assert_array_equal(served.engine.selector.variance, reference.variance)
    metrics = served.metrics_queue.get_nowait()
    assert metrics["kgps/version_lag"] == pytest.approx(5 - (3 + 3 + 4) / 3)
    assert metrics["kgps/informative"] == pytest.approx(1 / 3)


def test_a_group_counted_twice_or_never_handed_out_is_refused_before_anything_changes():
    served = service()
    served._set_columns(["accuracy"])
    batch_id, indices = served.choose()
    served.observe(batch_id, 0, indices[0], 0, rewards(2))
    with pytest.raises(RuntimeError, match=f"dataset index {indices[0]} as position 0 of batch {batch_id}"):
        served.observe(batch_id, 0, indices[0], 0, rewards(3))
    with pytest.raises(RuntimeError, match="did not hand out or already counted"):
        served.observe(batch_id, 1, indices[2], 0, rewards(3))  # not the prompt at that position
    with pytest.raises(RuntimeError, match="batch 7"):
        served.observe(7, 0, indices[0], 0, rewards(3))
    assert served.in_flight[batch_id].rewards[0][:, 0].sum() == 2 and served.engine.ledger.batches_scored == 0


def test_a_restart_hands_out_the_pending_batches_first_then_chooses():
    served = service()
    first, second = served.choose()[1], served.choose()[1]
    served.restart()  # a resumed run's new worker: both batches are pending, none in flight
    assert not served.in_flight
    assert [served.choose()[1], served.choose()[1]] == [first, second]
    third = served.choose()[1]
    assert not set(third) & set(first + second) and served.engine.ledger.batches_chosen == 3


def score_first_batch(worker, rewards_at):
    """As the rollout worker does over its connection: names the reward columns, asks for a batch, reports each group
    with `rewards_at(position)`, then asks for the next batch (whose answer the caller reads). Returns the first batch's
    `(batch id, indices)`."""
    worker.send(("columns", ["accuracy"]))
    worker.send(("choose",))
    batch_id, indices = worker.recv()
    for position, index in enumerate(indices):
        worker.send(("scored", batch_id, position, index, 0, rewards_at(position)))
    worker.send(("choose",))
    return batch_id, indices


def test_the_worker_talks_to_the_service_over_its_connection_and_learns_of_its_failure():
    served = service()
    address = served.listen()
    try:
        with Client(address, authkey=served.authkey) as worker:
            batch_id, indices = score_first_batch(worker, rewards)
            assert worker.recv()[0] == batch_id + 1
            worker.send(("scored", batch_id, 0, indices[0], 0, rewards(1)))  # counted already: the service fails
            worker.send(("choose",))
            kind, message = worker.recv()
        assert kind == "error" and "already counted" in message
        assert served.engine.ledger.batches_scored == 1
        with pytest.raises(RuntimeError, match="KGPS's selection engine failed"):
            served.raise_error()
    finally:
        served.stop()


def test_with_copies_the_worker_is_handed_rows_and_its_rows_reach_their_prompts():
    """Twelve prompts on 24 rows (row r holds prompt r % 12, its first row r < 12): the worker gets each prompt's first
    row; a group reported under another copy's row is refused; the batch reaches the prompts."""
    from trl_kgps.engine.copies import PromptCopies

    copies = PromptCopies(np.arange(24) % 12)
    engine = SelectionEngine(KGPSSelector(12, KGPSConfig(), seed=0), B)
    served = SelectionService(engine, KGPSConfig(), queue.Queue(), lambda: 0, G, copies=copies)
    served._set_columns(["accuracy"])
    reference = KGPSSelector(12, KGPSConfig(), seed=0)
    batch_id, rows = served.choose()
    np.testing.assert_array_equal(rows, reference.select(B))  # first rows are the prompts' numbers here
    with pytest.raises(RuntimeError, match="did not hand out or already counted"):
        served.observe(batch_id, 0, rows[1] + 12, 0, rewards(1))  # a copy of another prompt at that position
    for position, row in enumerate(rows):
        served.observe(batch_id, position, row + 12 * (position % 2), 0, rewards(position))  # either copy's row
    reference.update(np.array(rows), np.arange(B), np.full(B, G))
    np.testing.assert_array_equal(served.engine.selector.mean, reference.mean)


def test_groups_dropped_in_a_row_fail_the_service_with_the_cause_after_the_bound():
    """With drop_zero_advantage, MAX_DROPPED_BATCHES batches' worth of groups dropped in a row (none kept) stop the
    run: nothing reaches the optimizer, and the worker would generate on forever. A kept group starts the count
    again."""
    from trl_kgps.adapters.async_grpo import MAX_DROPPED_BATCHES

    served = service(num_prompts=3 * B * MAX_DROPPED_BATCHES)
    served.drop_zero_advantage = True
    served._set_columns(["accuracy"])
    limit = MAX_DROPPED_BATCHES * B

    def score(successes, dropped, groups):
        for _ in range(groups // B):
            batch_id, indices = served.choose()
            for position, index in enumerate(indices):
                served.observe(batch_id, position, index, 0, rewards(successes), dropped=dropped)

    score(0, dropped=True, groups=limit - B)  # one batch short of the bound
    score(2, dropped=False, groups=B)  # a group kept: the count starts again
    score(0, dropped=True, groups=limit - B)
    batch_id, indices = served.choose()
    served.observe(batch_id, 0, indices[0], 0, rewards(0), dropped=True)
    served.observe(batch_id, 1, indices[1], 0, rewards(0), dropped=True)
    with pytest.raises(ValueError, match=rf"dropped the last {limit} groups .* \({MAX_DROPPED_BATCHES} generation "):
        served.observe(batch_id, 2, indices[2], 0, rewards(G), dropped=True)
    assert served.in_flight[batch_id].rewards[2] is None and served.dropped_in_a_row == limit - 1  # unchanged
    with pytest.raises(ValueError, match="the last group's rewards were all None"):
        served.observe(batch_id, 2, indices[2], 0, np.full((G, 1), np.nan), dropped=True)


def test_a_failing_service_stops_the_worker_before_the_worker_learns_of_the_failure():
    # The worker's process then ends on the error with its stop requested, which `worker.stop()` would otherwise wait
    # for forever (an infinite reward ended training only after a hang in TRL's `worker.stop`).
    stopped = []
    served = service()
    served.stop_worker = lambda: stopped.append(served.error)
    address = served.listen()
    try:
        with Client(address, authkey=served.authkey) as worker:
            score_first_batch(worker, lambda position: np.array([[np.inf]] * G))
            kind, message = worker.recv()
            for _ in range(200):  # the service has failed: what the worker sends next meets no broken pipe
                if stopped:
                    break
                time.sleep(0.01)
            worker.send(("choose",))
            assert worker.recv()[0] == "error" and worker.recv() == (kind, message)
        assert kind == "error" and "returned inf" in message
        assert len(stopped) == 1 and isinstance(stopped[0], ValueError)
    finally:
        served.stop()


def test_a_process_whose_trainer_stopped_draining_kgps_metrics_still_exits():
    """KGPS puts metrics on the worker's multiprocessing queue, which the trainer drains; a run that ends (on an error)
    with more unread than the pipe holds must not wait at exit on the queue's feeder thread (it hung CI's pytest)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import multiprocessing, queue as _
        from trl_kgps import KGPSConfig, KGPSSelector
        from trl_kgps.adapters.async_grpo import SelectionService
        from trl_kgps.engine.engine import SelectionEngine

        metrics = multiprocessing.get_context("spawn").Queue(maxsize=4096)
        served = SelectionService(SelectionEngine(KGPSSelector(12), 3), KGPSConfig(), metrics, lambda: 0, 4)
        for step in range(2000):  # about 400 KB of metrics, never read: far more than a pipe's buffer
            served.log({f"kgps/metric_{i}": float(step) for i in range(8)})
        print("logged", flush=True)
        """
    )
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0 and "logged" in finished.stdout, finished.stderr[-2000:]
