"""The wheel scripts/package-wheel builds carries native files (libparla, Parla's engine and
espeak-ng): it is a platform wheel (py3-none-PLATFORM), with everything in platlib, as
auditwheel requires of a wheel it tags manylinux."""

from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools before 70.1
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]


class BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):  # type: ignore[no-untyped-def]
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": PlatformWheel})
