"""Why a run falls behind: the limits of a share group, as formulas of what a run measures."""
