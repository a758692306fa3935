"""Story 2: bounding memory in a pandas sales pipeline, with a dead end abandoned through ``/tree``.

Lucía's nightly job runs out of memory (a screenshot of the cron mail is attached). Under a plan-mode
extension (``custom`` and ``custom_message`` entries) the agent tries dask, which fails on a Latin-1
header; the branch is labelled and abandoned with ``/tree`` and a branch summary. On the new branch,
after a model and thinking change, it aggregates per file, gets interrupted (an aborted response), and
finishes. A side question in Spanish and a thank-you in Chinese, on another branch, end the session
with three leaves.
"""

from __future__ import annotations

from ..harness import Recorder, bash, edit, load_fixture, read, step, terminal_screenshot, write

NAME = "ventas-pipeline-refactor"
CWD = "/home/lucía/proyectos/ventas-pipeline"
FILES = load_fixture("ventas_pipeline_refactor")


def record(seed: int) -> Recorder:
    """The session, recorded with ``seed``."""
    r = Recorder(NAME, CWD, FILES, seed, "2026-03-04T15:02:44.118Z", "gpt-5.1",
                 thinking="low")
    rng = r.rng
    r.custom("plan-mode", {"enabled": True, "steps": []})
    start = r.user(
        "The nightly job `ventas datos/*.csv` dies with a MemoryError on the production box (4 GB RAM) since we "
        "loaded the full 3-year history. Screenshot of the cron mail attached. Refactor the pipeline so it runs in "
        "bounded memory. Keep the CLI exactly as it is — the cron entry must not change.",
        images=[terminal_screenshot(rng)])
    r.assistant(step("I'll read the pipeline and the design notes first.", read("ventas/pipeline.py"),
                     read("ventas/transform.py"), read("docs/diseño.md"),
                     thinking="pd.concat of ~900 files at once. Two options: process file by file and aggregate "
                              "incrementally (daily_totals is a sum, so it is decomposable), or use dask."))
    r.custom_message("plan-mode", "Plan mode is on: propose a plan and wait for approval before editing files.",
                     display=True, details={"source": "extension:plan-mode"})
    r.assistant(step("**Plan** (waiting for approval):\n1. Try `dask.dataframe` to read the exports lazily.\n"
                     "2. Keep `ventas/cli.py` unchanged.\n3. Add a test with two small exports."))
    r.user("ok, try dask")
    r.custom("plan-mode", {"enabled": False, "steps": ["dask read", "keep CLI", "test"]})
    r.assistant(step(None, bash("pip install 'dask[dataframe]'", "Successfully installed dask-2024.12.0 toolz-1.0.0 partd-1.4.2 locket-1.0.0 cloudpickle-3.1.0")))
    r.assistant(step(None, edit("ventas/pipeline.py",
                                "    frames = [read_export(p) for p in sorted(glob.glob(input_glob))]\n    df = pd.concat(frames, ignore_index=True)\n",
                                "    import dask.dataframe as dd\n\n    df = dd.read_csv(input_glob, sep=\";\", decimal=\",\", encoding=\"latin-1\").compute()\n")))
    r.assistant(step(None, bash("ventas 'datos/2025-*.csv' -o /tmp/t.parquet",
                                "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xf1 in position 18: invalid continuation byte\n"
                                "(dask ignored encoding for the header sample; tienda 'Logroño')", exit_code=1)))
    dead_leaf = r.assistant(step("dask's CSV reader trips on the Latin-1 header (`Logroño`), and `.compute()` would "
                                 "materialize everything again anyway, so it doesn't bound memory. I'd rather "
                                 "aggregate per file instead."))
    r.label(dead_leaf, "dask-dead-end")
    r.user_bash("git checkout -- ventas/pipeline.py && pip uninstall -y dask",
                "Found existing installation: dask 2024.12.0\nUninstalling dask-2024.12.0:\n  Successfully uninstalled dask-2024.12.0")
    r.project.files["ventas/pipeline.py"] = FILES["ventas/pipeline.py"]
    # abandon the dask branch: /tree back to the first assistant answer, summarizing the dead end
    r.navigate(start)
    r.model_change("claude-opus-4-5")
    r.thinking_level_change("high")
    r.user("Forget dask. Aggregate per file: daily_totals is a sum, so partial totals can be summed again. "
           "No new dependencies. Y por favor, mensajes de log en español.")
    r.assistant(step("Per-file aggregation it is; memory then scales with one export plus the running totals.",
                     read("ventas/pipeline.py"), read("ventas/ingest.py"),
                     thinking="Combine partial daily_totals with concat + groupby-sum at the end; totals are small "
                              "(days × stores). Log in Spanish."))
    r.assistant(step(None, edit("ventas/pipeline.py",
                                "    frames = [read_export(p) for p in sorted(glob.glob(input_glob))]\n    df = pd.concat(frames, ignore_index=True)\n    totals = daily_totals(clean(df))\n",
                                "    partials = []\n    for path in sorted(glob.glob(input_glob)):\n"
                                "        partials.append(daily_totals(clean(read_export(path))))\n"
                                "        log.info(\"procesado %s\", path)\n"
                                "    totals = daily_totals(pd.concat(partials, ignore_index=True))\n")))
    r.assistant(step(None, edit("ventas/pipeline.py", "import glob\n", "import glob\nimport logging\n",
                                ("from .transform import clean, daily_totals\n",
                                 "from .transform import clean, daily_totals\n\nlog = logging.getLogger(\"ventas\")\n"))))
    r.assistant(step(None, write("tests/test_pipeline.py",
                                 "from ventas.pipeline import run\n\n\ndef test_run_sums_across_files(tmp_path):\n"
                                 "    for day, units in [(\"01\", 2), (\"02\", 3)]:\n"
                                 "        (tmp_path / f\"t{day}.csv\").write_text(\n"
                                 "            f\"fecha;tienda;producto;unidades;importe\\n{day}/03/2026;Logroño;a1;{units};1,5\\n\", encoding=\"latin-1\")\n"
                                 "    out = tmp_path / \"out.parquet\"\n    assert run(str(tmp_path / \"*.csv\"), str(out)) == 2\n")))
    r.user("wait, stop — use pyarrow for the output, not to_parquet defaults")
    r.assistant(step("Understood, I'll switch the writer to an explicit `pyarrow` table with"), stop="aborted",
                error="Request was aborted.")
    r.user("actually never mind, to_parquet uses pyarrow already. Run the tests.")
    r.assistant(step(None, bash("python -m pytest -q", "..                                                                       [100%]\n2 passed in 0.84s")))
    r.user_bash("/usr/bin/time -v ventas 'datos/*.csv' -o /tmp/totales.parquet 2>&1 | grep -E 'Maximum resident|filas'",
                "2191 filas escritas en /tmp/totales.parquet\n\tMaximum resident set size (kbytes): 412880")
    r.assistant(step("Peak memory on the full history is now about 403 MB (was > 4 GB), and the CLI is unchanged: "
                     "`ventas datos/*.csv` still writes `salida/totales.parquet`. ✅"))
    r.label(dead_leaf, None)
    good = r.leaf
    r.label(good, "per-file ✔")
    r.session_info("Pipeline: memoria acotada (agregación por fichero) 📉")
    # a side question on another branch, left as a separate leaf without a summary
    r.navigate(good, summarize=False)
    r.user("¿Cuánto tardaría con 10 años de histórico? Solo una estimación.")
    r.assistant(step("Roughly linear in the number of files: ~900 files take about 6 minutes now, so 10 years "
                     "(~3 000 files) would take ~20 minutes, with the same ~400 MB peak."))
    r.model_change("claude-haiku-4-5")
    r.user("谢谢！顺便问一下：日志里的“procesado”以后要不要翻译成中文？先不用。gracias 🙏")
    r.assistant(step("De nada. 👍"))
    return r
