"""botpsy's IFEval and IFBench instruction checkers."""
