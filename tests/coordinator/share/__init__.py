"""Share groups (KIP-932) on the manual clock: the share coordinator driven directly, no I/O."""
