"""``botpsy report``: a run folder stitched into ``report.md`` with its plots.

``command``   ReportConfig and ``main``: reads the run folder, writes ``RUN/report/report.md`` and PNGs
``folder``    reading the run's files; "not run" and problem lines that name the command and the file
``sections``  run summary, data, training curves, release formats (parity, sizes)
``results``   evaluation tables, the device report card, the agent run
``plots``     training curves per stage, device success and loop rate per model (PNG)
"""
