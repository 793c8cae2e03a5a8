"""Print the README's install lines with the package's address pointed at a built wheel: `.ci/run` runs them."""

import re
import sys
from pathlib import Path


wheel = Path(sys.argv[1]).resolve()
readme = (Path(__file__).parents[1] / "README.md").read_text()
block = re.search(r"```bash\n(.*?)```", readme, flags=re.S).group(1)
lines = [line for line in block.splitlines() if "pip install" in line]
print("\n".join(re.sub(r"git\+https://\S+?(?=\")", wheel.as_uri(), line) for line in lines))
