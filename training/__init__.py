"""Training the model of SPEC §2 (SPEC §3), and the data-requirement sweeps of SPEC §4.5.

    train.py        one run: ``TrainConfig``, ``train``, the run folder it writes and resumes
    precision.py    ``--precision auto``: fp32 or bf16 autocast, chosen by timing the step on this machine
    grid.py         a sweep's grid (``SweepConfig``, ``Point``) and its early-stopping rule (``EarlyStop``)
    sweep_folder.py a sweep folder on disk: ``sweep.json`` and one run folder per grid point, for the
                    trainer that writes it and the claim and report that read it
    sweep.py        running a sweep's points: in this process, on worker processes or on Ray
    train_cli.py    ``assignadd-train``
    sweep_cli.py    ``assignadd-sweep``

Layering: data -> model -> training -> interventions -> hypotheses -> reports. Training imports only
``data``, ``model`` and the root utilities (``fileio``; ``cli_util`` for the two commands); the sweep
folder's readers (``hypotheses/data_requirements.py``, ``reports/sweep_report.py``) import
``sweep_folder`` and ``grid``. Nothing is imported here, so the commands answer ``--help`` without
importing torch.
"""
