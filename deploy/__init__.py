"""Release tooling (not deployed): the package build (`make package`), the infrastructure check
(`make check-infra`) and the capacity counts."""
