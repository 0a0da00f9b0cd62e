// Package sdktest holds the shared scenario tests of the Python and
// TypeScript clients (sdk/python, sdk/typescript): each scenario runs the
// language's scenario script as a real process against a real `clasp serve`
// (SQLite, and PostgreSQL when CLASP_TEST_POSTGRES_URL is set) and checks
// what the script saw together with the server's state. It has tests only.
package sdktest
