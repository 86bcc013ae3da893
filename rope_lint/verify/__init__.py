"""`rope-lint fix --verify`: the original and the fixed code, imported side by side and compared at run time.

It sits between the run layer and the probe: it imports the code it fixes (which `check` and a plain `fix` never do),
builds each rotary class both ways, and runs the probe's conditions on the fixed one.
"""
