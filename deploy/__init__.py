"""Release tooling (not deployed): the package build (`make package`) and the infrastructure check (`make check-infra`)."""
