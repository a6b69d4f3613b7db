// Command temporal-ui serves the Temporal Web UI (github.com/temporalio/ui-server, pinned in this module) for the
// local stack: the dev server's UI without the CLI, configured by flags instead of a config directory.
package main

import (
	"flag"
	"log"
	"net"
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
	// Same settings as the CLI's `server start-dev` gave its embedded UI.
	s := uiserver.NewServer(server_options.WithConfigProvider(&uiconfig.Config{
		Host:                *ip,
		Port:                *port,
		TemporalGRPCAddress: *temporal,
		EnableUI:            true,
		DefaultNamespace:    "default",
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
	}))
	log.Printf("temporal-ui: serving http://%s for %s", net.JoinHostPort(*ip, strconv.Itoa(*port)), *temporal)
	if err := s.Start(); err != nil {
		log.Fatalf("temporal-ui: %v", err)
	}
}
