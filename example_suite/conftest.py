"""The example suite runs on the embedded engine simulator (pytest.ini: goodput_engine = sim)
unless an engine is named on the command line.

Try:  pytest example_suite --goodput-baseline                    (passes)
      GOODPUT_SIM_SLOWDOWN=1.2 pytest example_suite --goodput-baseline   (fails: regressions)
      GOODPUT_SIM_IMAGE_COST=3 pytest example_suite --goodput-baseline   (test_vision.py regresses)
"""
