"""Stand-in for the get-pip.py bootstrap script that ansible-test downloads on its first run.

ansible-test fetches get-pip.py (pip 24.2's) from a host that cannot be reached here, to put pip
into the virtual environments it creates. Like the real script, this one installs pip into the
running interpreter and accepts pip install arguments (such as ``pip==24.2``). The real script
carries pip inside itself; this one starts from the standard library's bundled wheel
(ensurepip) and lets that pip install the requested version from the package index. The real
script's own switches ``--no-setuptools`` and ``--no-wheel`` mean "install only pip", which is
what this one does anyway, so they are dropped.
"""
import subprocess
import sys

OWN_SWITCHES = {"--no-setuptools", "--no-wheel"}


def main():
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
    args = [a for a in sys.argv[1:] if a and a not in OWN_SWITCHES]
    if args:
        subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    main()
