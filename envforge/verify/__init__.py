"""The verifier: levels L0–L4 over two Drivers, producing a Report of Findings."""
