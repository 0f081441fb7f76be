"""`python -m gpu_cluster.infra.reference schema`: the stack file's JSON Schema."""

import sys

from gpu_cluster.infra.reference import main

sys.exit(main(sys.argv[1:]))
