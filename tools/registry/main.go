// Command registry is the CNCF distribution registry with only the storage drivers pykured's tests use.
//
// The upstream command (github.com/distribution/distribution/v3/cmd/registry) also links the S3, GCS and
// Azure storage drivers, the pull-through proxy and the token and htpasswd authenticators, and the module
// has no build tags to leave them out: this command registers the filesystem and in-memory drivers alone
// (storage drivers register themselves when imported) and runs the same root command, so the build pulls
// in none of the cloud SDKs.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
