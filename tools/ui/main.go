// Command temporal-ui serves the Temporal Web UI (github.com/temporalio/ui-server, pinned in this module) for the
// local stack: the dev server's UI without the CLI, configured by flags instead of a config directory.
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"strconv"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/server_options"
)

func main() {
	ip := flag.String("ip", "127.0.0.1", "address to listen on (loopback by default)")
	port := flag.Int("port", 8233, "HTTP port")
	temporal := flag.String("temporal-address", "127.0.0.1:7233", "Temporal frontend gRPC host:port")
	flag.Parse()
	// Same settings as the CLI's `server start-dev` gave its embedded UI, plus the codec server, named by the
	// ui-server's own variable (an older build ignores it: the pages then show ciphertext, nothing breaks).
	cfg := &uiconfig.Config{
		Host:                *ip,
		Port:                *port,
		TemporalGRPCAddress: *temporal,
		EnableUI:            true,
		DefaultNamespace:    "default",
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
	}
	cfg.Codec.Endpoint = os.Getenv("TEMPORAL_CODEC_ENDPOINT")
	s := uiserver.NewServer(server_options.WithConfigProvider(cfg))
	log.Printf("temporal-ui: serving http://%s for %s", net.JoinHostPort(*ip, strconv.Itoa(*port)), *temporal)
	if err := s.Start(); err != nil {
		log.Fatalf("temporal-ui: %v", err)
	}
}
