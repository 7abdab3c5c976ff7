"""The Unix accounts the exchange tests create: every name starts with PREFIX (they are removed by it)."""
PREFIX = "rlhft"
INSTRUCTORS = f"{PREFIX}_instructors"
