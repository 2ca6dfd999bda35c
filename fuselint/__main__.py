"""`python -m fuselint` runs the same CLI as the `fuselint` script."""

from fuselint.cli import run

if __name__ == "__main__":
    run()
