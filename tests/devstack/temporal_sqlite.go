package devstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const (
	// SQLiteSchemaVersion is the SQLite schema of the server in tools/server/go.mod (its schema/sqlite
	// Version); a new database is stamped with it, and a test holds it to the module.
	SQLiteSchemaVersion = "0.11"
	// cliDevServerSchema is the schema of a database the Temporal CLI v1.5.1's dev server (server 1.29.1) wrote:
	// it kept no version table, so the upgrade starts from this.
	cliDevServerSchema = "0.10"
)

// sqliteSchema is the server module's SQLite schema, which tools/build.sh copies beside the binaries (the SQL
// tool embeds only the MySQL and PostgreSQL ones).
type sqliteSchema struct{ tool, dir string }

func schemaBeside(server string) sqliteSchema {
	return sqliteSchema{tool: sibling(server, "temporal-sql-tool"), dir: sibling(server, "temporal-schema/sqlite/v3")}
}

func (s sqliteSchema) update() []string {
	return []string{"update-schema", "--schema-dir", filepath.Join(s.dir, "temporal", "versioned")}
}

// prepareDatabase creates the SQLite file with the server's schema, or brings an existing one up to it with
// temporal-sql-tool. A file that cannot be upgraded is moved aside (logf says where) and a new one created, so
// the server never starts on a schema it does not know.
func prepareDatabase(ctx context.Context, schema sqliteSchema, dbFile string, logf func(string, ...any)) error {
	if _, err := os.Stat(dbFile); errors.Is(err, fs.ErrNotExist) {
		return createDatabase(ctx, schema, dbFile)
	}
	out, err := runSQLTool(ctx, schema.tool, dbFile, schema.update()...)
	if err == nil {
		return nil
	}
	if strings.Contains(out, "schema_version") { // no version table: the CLI's dev server wrote it
		if err = upgradeCLIDatabase(ctx, schema, dbFile); err == nil {
			logf("upgraded %s from the Temporal CLI dev server's schema %s to %s", dbFile, cliDevServerSchema, SQLiteSchemaVersion)
			return nil
		}
	}
	aside := dbFile + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(dbFile+suffix, aside+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("moving the unusable %s aside: %w", dbFile+suffix, err)
		}
	}
	logf("could not upgrade %s to the server's schema %s (%v); moved it to %s and started with an empty database",
		dbFile, SQLiteSchemaVersion, err, aside)
	return createDatabase(ctx, schema, dbFile)
}

// upgradeCLIDatabase stamps a CLI dev server's database with the schema it has, then applies the newer versions.
func upgradeCLIDatabase(ctx context.Context, schema sqliteSchema, dbFile string) error {
	if _, err := runSQLTool(ctx, schema.tool, dbFile, "setup-schema", "-v", cliDevServerSchema); err != nil {
		return err
	}
	_, err := runSQLTool(ctx, schema.tool, dbFile, schema.update()...)
	return err
}

// createDatabase writes the server's schema (with its version) and the visibility schema into a new file.
func createDatabase(ctx context.Context, schema sqliteSchema, dbFile string) error {
	_, err := runSQLTool(ctx, schema.tool, dbFile, "setup-schema", "-v", SQLiteSchemaVersion,
		"-f", filepath.Join(schema.dir, "temporal", "schema.sql"))
	if err != nil {
		return err
	}
	_, err = runSQLTool(ctx, schema.tool, dbFile, "setup-schema", "--disable-versioning",
		"-f", filepath.Join(schema.dir, "visibility", "schema.sql"))
	return err
}

// runSQLTool runs one temporal-sql-tool command on the SQLite file and returns its output.
func runSQLTool(ctx context.Context, sqlTool, dbFile string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sqlTool, append([]string{"--plugin", "sqlite", "--db", dbFile, "--ca", "mode=rwc"}, args...)...)
	cmd.Env = MergeEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("temporal-sql-tool %s: %w: %s", strings.Join(args, " "), err, lastLines(out, 5))
	}
	return string(out), nil
}
