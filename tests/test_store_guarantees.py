"""Every sentence of docs/leaderboard.md's "What the store and the runner guarantee" and
the test that holds it (issue 48: the docs' guarantees are exactly the tested ones). The
tests of this file are the ones the map lacked; `test_every_test_of_the_map_exists` keeps
the map honest (a test renamed or removed fails it). S: slow tier.

A kill loses only the jobs in flight.
- SIGKILL of the driver keeps every finished job, and an uninterrupted run gives the same
  numbers: test_leaderboard_runner.py::test_sigkill_mid_sweep_then_resume_is_exactly_once_and_identical;
  fault_injection.py's kill -9 and Ctrl-C probes (S: test_edge_faults.py::test_fault_injection_loses_and_doubles_no_row)
- ... of a worker: test_leaderboard_runner.py::test_failures_are_recorded_and_the_sweep_goes_on
  (`lbfault/die` kills its worker: a failed row, the sweep goes on)
- ... a crash or a power loss (synchronous=FULL, WAL mode):
  test_store_guarantees.py::test_commits_are_synchronous_full_in_a_file_in_wal_mode
- orphaned workers exit: test_leaderboard_runner.py::test_sigkill_mid_sweep_then_resume_is_exactly_once_and_identical
- the jobs of one training are committed in one transaction, all or none, never a part
  trained alone: test_training_group_commit.py::test_a_kill_between_a_groups_rows_stores_all_of_it_or_none;
  test_leaderboard.py::test_a_batch_of_results_commits_whole_or_not_at_all;
  fault_injection.py's training-group probe (S)
- running the sweep again skips what is stored and runs the rest:
  test_leaderboard.py::test_resume_skips_ok_and_failed_unless_retrying
- `--retry-failed` re-runs the failed jobs: test_leaderboard_runner.py::test_retry_failed_reruns_only_failures
- a row whose metrics or config cannot be read is skipped with a one-line warning naming
  its key and run again: test_results_safety.py::test_a_row_with_corrupt_metrics_is_skipped_with_a_warning_and_replaced_by_a_rerun;
  test_results_safety.py::test_unreadable_text_and_config_are_skipped_and_repaired
- Ctrl-C stops a sweep with one line, status 130:
  test_results_safety.py::test_ctrl_c_stops_a_sweep_with_one_line_and_keeps_what_finished;
  test_results_safety.py::test_ctrl_c_at_random_moments_always_stops_a_sweep (S)

Results are written by sweep drivers only, one row per finished job, committed at once:
  test_store_guarantees.py::test_workers_never_open_the_store;
  test_store_guarantees.py::test_each_finished_job_is_one_row_committed_as_it_lands;
  test_leaderboard.py::test_store_commits_keeps_ok_rows_and_replaces_failed_ones

A changed data file is not scored with its old results (sha256; refused in one line
before any job, the stored results stay):
  test_real_data.py::test_a_changed_data_file_is_not_scored_with_its_old_results

Every job has a time limit (default 86400 s; 0, inf, none: no limit; negative refused):
  test_results_safety.py::test_every_executor_has_a_default_timeout_and_inline_honours_it;
  test_results_safety.py::test_timeout_values; test_results_safety.py::test_bad_timeout_values;
  test_results_safety.py::test_every_spelling_of_zero_means_no_limit;
  test_results_safety.py::test_negative_timeouts_get_our_message_and_tiny_ones_time_out

Concurrent sweeps share the work.
- a lease naming pid and host, a second sweep runs only unclaimed jobs, takes over a
  dead driver's: test_results_safety.py::test_a_claimed_job_is_not_claimed_again_until_it_is_stored_or_its_owner_is_gone
- ... or a lease that outlived the job timeout + 5 minutes:
  test_store_guarantees.py::test_a_lease_outlives_the_job_timeout_by_five_minutes
- no job runs twice, no row is doubled: test_results_safety.py::test_two_identical_sweeps_at_once_run_each_job_once;
  fault_injection.py's three identical sweeps (S)

The exit status tells the truth.
- 0 only when every job is stored as ok; 1 while any is stored failed:
  test_edge_faults.py::test_an_agent_that_exits_is_a_failed_job_and_the_inline_sweep_goes_on;
  test_store_guarantees.py::test_the_exit_status_is_0_only_when_every_job_is_ok
- including failures stored by an earlier run:
  test_results_safety.py::test_a_rerun_over_stored_failures_says_so_and_exits_1
- 2 for bad input: test_cli.py::test_bad_input_is_one_line_exit_2; fault_injection.py's
  41 malformed command lines (S)
- the first 10 failures, then "... and N more": test_results_safety.py::test_every_failure_is_counted_when_more_than_ten

Nothing typed overwrites results.
- the results file, another SQLite file, its -wal/-shm, directly or through a link:
  test_results_safety.py::test_report_and_export_onto_the_store_are_refused_and_the_store_is_unchanged;
  test_results_safety.py::test_links_and_side_files_of_a_store_are_refused_everywhere;
  test_results_safety.py::test_report_onto_the_store_from_the_console_script
- ... through a hard link; --ship; before any job:
  test_outputs_never_on_inputs.py::test_report_ship_onto_the_store_is_refused_and_the_store_kept;
  test_outputs_never_on_inputs.py::test_ship_into_a_folder_or_a_missing_one_is_one_line_before_any_job
- a file the run reads: test_outputs_never_on_inputs.py::test_an_input_of_the_run_is_no_output
- a read-only file, a folder, a folder that is a file:
  test_results_safety.py::test_bad_output_paths_get_their_own_message
- a missing folder, never made silently:
  test_outputs_never_on_inputs.py::test_report_and_export_into_a_missing_folder_are_refused
- a reproduction's --out folder itself is made, in a folder that exists:
  test_store_guarantees.py::test_a_reproductions_out_folder_is_made_only_in_a_folder_that_exists
- a reproduction's --out that is the store or its side names, or inside one (resolved):
  test_store_names.py::test_a_reproductions_out_on_a_new_store_or_its_side_files_is_refused_first;
  test_store_names.py::test_a_reproductions_out_on_a_stored_store_keeps_every_row;
  test_store_names.py::test_an_output_folder_beside_the_store_is_allowed_and_one_in_its_names_is_not
- a --results path that is a side file: test_results_safety.py::test_links_and_side_files_of_a_store_are_refused_everywhere
- written to a temporary file and renamed: test_results_safety.py::test_outputs_replace_the_old_file_atomically

Refused before any change, in one line.
- a foreign SQLite file: test_results_safety.py::test_a_foreign_sqlite_file_is_refused_before_anything_changes
- another schema version: test_leaderboard.py::test_bad_results_files; test_leaderboard.py::test_bad_results_files_from_cli
- a damaged file (quick check, header, WAL damage):
  test_results_safety.py::test_a_damaged_store_gives_one_line_for_every_command;
  test_results_safety.py::test_a_damaged_schema_page_gives_one_line;
  test_edge_faults.py::test_damage_in_the_wal_is_refused_and_salvaged_never_read_in_part
- bytes altered on disk: SQLite's quick check at every open (the two above); the store
  reads the log itself only where SQLite would drop committed rows without a word (both
  fail without leaderboard.store.wal):
  test_edge_faults.py::test_damage_in_the_wal_is_refused_and_salvaged_never_read_in_part;
  test_store_files.py::test_a_zeroed_wal_is_refused_not_read_as_an_empty_store
- a -wal of another store, a zeroed one: test_store_files.py::test_a_stale_wal_of_another_store_is_refused_and_nothing_is_written;
  test_store_files.py::test_a_zeroed_wal_is_refused_not_read_as_an_empty_store
- a read-only path for a sweep: test_leaderboard.py::test_read_only_results_paths
- a file with more than one name (hard links), to write or to read:
  test_store_names.py::test_a_hard_linked_store_is_refused_by_a_sweep_with_one_line_and_no_row;
  test_store_names.py::test_a_library_open_of_a_hard_linked_store_raises_input_error
- a link or a relative path names the file it resolves to, with its -wal:
  test_store_files.py::test_a_damaged_wal_is_found_through_a_symbolic_link;
  test_store_files.py::test_a_relative_path_and_a_link_name_one_store;
  test_store_files.py::test_salvage_through_a_link_reads_the_files_the_link_names
- salvage copies every readable row, leaves R as it is, --wal ignore|use:
  test_results_safety.py::test_salvage_copies_every_readable_row_of_a_damaged_store;
  test_store_files.py::test_salvage_rebuilds_a_damaged_header;
  test_store_files.py::test_a_stale_wal_of_another_store_is_refused_and_nothing_is_written
- many processes creating one new file all succeed:
  test_results_safety.py::test_many_processes_creating_one_new_store_all_succeed
- a full disk while making it leaves no empty file:
  test_store_files.py::test_a_full_disk_at_creation_leaves_no_empty_store

A fault of the machine or the cluster is one line, status 3, with how many jobs are stored.
- a full disk: test_edge_faults.py::test_a_full_disk_is_the_machines_fault_not_bad_input;
  test_store_files.py::test_a_sweep_stopped_by_a_full_disk_says_what_is_stored
- an I/O error: test_store_guarantees.py::test_an_io_error_stops_a_sweep_as_the_machines_fault_with_what_is_stored
- a Ray head that stopped answering: test_ray_faults.py::test_the_heads_death_is_one_line_with_status_3_and_what_is_stored (S);
  test_ray_faults.py::test_the_head_watch_knocks_at_the_gcs_port;
  test_edge_faults.py::test_an_unreachable_ray_cluster_is_one_line_and_leaves_no_file

Read-only stores show every row (a read-only folder; no -shm: a private copy):
  test_leaderboard.py::test_read_only_results_paths;
  test_results_safety.py::test_read_only_store_without_its_shm_file_shows_every_committed_row

Compiled code does not change numbers (the cache on for the command and its workers):
  test_leaderboard.py::test_enable_compilation_cache_sets_this_process_and_children;
  test_compilation_cache.py::test_a_second_process_neither_compiles_nor_traces_the_classifier;
  test_compilation_cache.py::test_a_program_jax_loaded_from_its_cache_is_never_stored_broken

Each row records its versions, host, wall time and when it finished:
  test_leaderboard.py::test_a_real_job_row_has_metrics_timings_config_and_versions;
  test_jobs.py::test_a_result_names_the_commit_of_the_code_that_made_it
"""  # noqa: E501 (a test's name whole on its line, for grep)

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from experiments.cli import main
from leaderboard.execution import runner
from leaderboard.execution.executors import InlineExecutor
from leaderboard.execution.jobs import expand
from leaderboard.execution.runner import run_sweep
from leaderboard.outputs import check_output_path, write_atomically
from leaderboard.store import ResultsStore
from leaderboard.store.results_store import SQLITE_IOERR
from testbed.errors import EnvironmentFault, InputError

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
COINS = [f"coin/{i}" for i in range(6)]


def test_every_test_of_the_map_exists():
    """Each `file::test` the map above names is a test of that file."""
    named = re.findall(r"(test_\w+\.py)::(test_\w+)", __doc__)
    assert len(named) > 50
    missing = [
        f"{file}::{name}"
        for file, name in named
        if not re.search(rf"^def {name}\(", (TESTS / file).read_text(), re.M)
    ]
    assert not missing, missing


def test_commits_are_synchronous_full_in_a_file_in_wal_mode(tmp_path):
    """A power loss keeps every commit: each is synced (synchronous=FULL), in WAL mode."""
    path = tmp_path / "r.db"
    with ResultsStore(path) as store:
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with sqlite3.connect(path) as conn:  # the file itself says WAL (its header, any reader)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert path.read_bytes()[18:20] == b"\x02\x02"  # the header's read/write versions: WAL


def test_workers_never_open_the_store():
    """Rows are written by the sweep's driver only: the code a worker runs (the worker
    process, the executors that start it) never opens the results file."""
    for name in ("worker.py", "executors.py"):
        source = (ROOT / "leaderboard" / "execution" / name).read_text()
        for word in ("ResultsStore", "sqlite3", "leaderboard.store", "from .store", ".record("):
            assert word not in source, (name, word)


def test_each_finished_job_is_one_row_committed_as_it_lands(tmp_path, monkeypatch):
    """One row per finished job, committed at once: after each result another connection
    reads it, before the next job has run."""
    path = tmp_path / "r.db"
    seen: list[tuple[int, int]] = []  # (rows in the call, rows another reader sees)
    record_many = ResultsStore.record_many

    def spy(self, results):
        results = list(results)
        changed = record_many(self, results)
        with sqlite3.connect(path) as other:
            seen.append((len(results), other.execute("SELECT COUNT(*) FROM results").fetchone()[0]))
        other.close()
        return changed

    monkeypatch.setattr(ResultsStore, "record_many", spy)
    with ResultsStore(path) as store:
        summary = run_sweep(expand(["uniform"], COINS), store, InlineExecutor())
    assert summary.ok == len(COINS)
    assert seen == [(1, i + 1) for i in range(len(COINS))]


def test_a_lease_outlives_the_job_timeout_by_five_minutes(tmp_path, monkeypatch):
    """A job's lease lasts its time limit + 5 minutes (a worker's start-up); with no limit
    it lasts as long as its driver lives."""
    claimed: list[float | None] = []
    claim = ResultsStore.claim

    def spy(self, key, **kwargs):
        claimed.append(kwargs["seconds"])
        return claim(self, key, **kwargs)

    monkeypatch.setattr(ResultsStore, "claim", spy)
    assert runner.STARTUP_ALLOWANCE == 300.0
    for timeout, seconds in ((10, 310.0), (0, None)):
        claimed.clear()
        with ResultsStore(tmp_path / f"r{timeout}.db") as store:
            run_sweep(expand(["uniform"], COINS[:2]), store, InlineExecutor(timeout=timeout))
        assert claimed == [seconds, seconds]


def test_the_exit_status_is_0_only_when_every_job_is_ok(tmp_path, capsys):
    """0 when every job of the sweep is stored as ok, and only then: one failed job (a
    deliberate error) makes it 1, this run and the next."""
    db = str(tmp_path / "r.db")
    sweep = ["sweep", "--agent", "uniform", "--executor", "inline", "--results", db, "--quiet",
             "--import", "leaderboard_faults"]  # fmt: skip
    assert main([*sweep, "--problem", ",".join(COINS[:2])]) == 0
    assert main([*sweep, "--problem", ",".join([*COINS[:2], "lbfault/raise"])]) == 1
    assert main([*sweep, "--problem", ",".join([*COINS[:2], "lbfault/raise"])]) == 1
    assert main([*sweep, "--problem", ",".join(COINS[:2])]) == 0  # the failed one not in it
    capsys.readouterr()


class _FailingConnection:
    """A store's connection whose writes of rows fail with SQLite's I/O error after `ok`."""

    def __init__(self, conn: sqlite3.Connection, ok: int):
        self._conn, self.ok = conn, ok

    def execute(self, sql: str, *args):
        if sql.lstrip().startswith("INSERT INTO results"):
            if self.ok <= 0:
                e = sqlite3.OperationalError("disk I/O error")
                e.sqlite_errorcode = SQLITE_IOERR
                raise e
            self.ok -= 1
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_an_io_error_stops_a_sweep_as_the_machines_fault_with_what_is_stored(tmp_path):
    """An I/O error while storing a row stops the sweep as the machine's fault (status 3
    on the command line: `EnvironmentFault`), saying how many of its jobs are stored."""
    with ResultsStore(tmp_path / "r.db") as store:
        real = store._conn
        store._conn = _FailingConnection(real, ok=2)
        try:
            with pytest.raises(EnvironmentFault) as stopped:
                run_sweep(expand(["uniform"], COINS), store, InlineExecutor())
        finally:
            store._conn = real
        assert len(store.rows()) == 2
    line = str(stopped.value)
    assert "\n" not in line and "disk I/O error" in line and "the machine's fault" in line
    assert "2 of the sweep's 6 are stored: run it again to resume" in line


def test_a_reproductions_out_folder_is_made_only_in_a_folder_that_exists(tmp_path):
    """A reproduction's `--out` folder itself is made when written (`make_folder`), in a
    folder that exists; a missing folder above it is refused before any work."""
    table = tmp_path / "new" / "table.md"
    assert check_output_path("--out", table, make_folder=True) == table
    assert not table.parent.exists()  # checking makes nothing
    write_atomically("--out", table, lambda tmp: tmp.write_text("| a |\n"), make_folder=True)
    assert table.read_text() == "| a |\n"
    with pytest.raises(InputError, match="--out"):
        check_output_path("--out", tmp_path / "no" / "new" / "table.md", make_folder=True)
    with pytest.raises(InputError, match="--out"):  # without make_folder: never made
        check_output_path("--out", tmp_path / "other" / "table.md")
    assert not (tmp_path / "no").exists() and not (tmp_path / "other").exists()
