import sys
from pathlib import Path

# Test modules import their shared helpers as `helpers`.
sys.path.insert(0, str(Path(__file__).parent))
