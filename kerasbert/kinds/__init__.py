"""Task kinds: the loss, label layout, landscape and export behaviour shared by every task
of a kind (kerasbert/kinds/base.py has the contract)."""
