// Package deploy holds no code: its tests check the deployment files against the code they deploy.
// docker-compose.yml and the Dockerfile must set only the environment variables the binaries read (derived from
// internal/config, simulator/sim and the Temporal SDK's envconfig, not listed by hand), pin every image, publish
// the ports the binaries listen on, and start services in a working order. Alert rules under prometheus/ are
// checked by check.sh with promtool.
package deploy
