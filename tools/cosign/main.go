// Command cosign is sigstore's cosign without the cloud KMS signers.
//
// The upstream command (github.com/sigstore/cosign/v3/cmd/cosign) registers the AWS, Azure, GCP and
// HashiCorp Vault KMS signers by importing them, and the module has no build tags that leave them out.
// pykured's release signs with a key file (tools/release --key, in the tests) or keylessly (the public
// release), so this command runs the same command tree without them, and the build pulls in none of
// those SDKs. A command's error ends the process with cosign's own exit code for it.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/sigstore/cosign/v3/cmd/cosign/cli"
	cosignerrors "github.com/sigstore/cosign/v3/cmd/cosign/errors"
)

func main() {
	if err := cli.New().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "error during command execution: %v\n", err)
		var coded *cosignerrors.CosignError
		if errors.As(err, &coded) {
			os.Exit(coded.ExitCode())
		}
		os.Exit(1)
	}
}
