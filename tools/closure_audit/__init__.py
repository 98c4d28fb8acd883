"""closure-audit: loader-faithful audits of ELF trees and Nix closures."""

__version__ = "0.1.0"
