package chaos

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// termWatch reads the servers' logs for hashicorp/raft's "election won"
// lines (`election won: term=N tally=M`): no term may be won by two
// servers. (weft does not expose its Raft term otherwise; see
// docs/chaos.md.)
type termWatch struct {
	mu       sync.Mutex
	offsets  map[string]int64
	winners  map[uint64]map[string]string // term → server → the log line
	reported map[uint64]bool
}

func newTermWatch() *termWatch {
	return &termWatch{offsets: map[string]int64{}, winners: map[uint64]map[string]string{}, reported: map[uint64]bool{}}
}

var electionWon = regexp.MustCompile(`election won: .*\bterm=(\d+)`)

// scan reads what the logs gained since the last scan and returns a line
// for each term newly won by more than one server.
func (w *termWatch) scan(c *cluster) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range serverNames {
		path := c.servers[s].logPath
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		f.Seek(w.offsets[s], io.SeekStart)
		r := bufio.NewReader(f)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break // a partial last line is read again next time
			}
			w.offsets[s] += int64(len(line))
			m := electionWon.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			term, _ := strconv.ParseUint(m[1], 10, 64)
			if w.winners[term] == nil {
				w.winners[term] = map[string]string{}
			}
			w.winners[term][s] = strings.TrimSpace(line)
		}
		f.Close()
	}
	var out []string
	for term, ws := range w.winners {
		if len(ws) < 2 || w.reported[term] {
			continue
		}
		w.reported[term] = true
		var lines []string
		for s, l := range ws {
			lines = append(lines, s+": "+l)
		}
		sort.Strings(lines)
		out = append(out, fmt.Sprintf("term %d was won by %d servers:\n    %s", term, len(ws), strings.Join(lines, "\n    ")))
	}
	return out
}

// figures returns how many terms were won and the most winners of one term.
func (w *termWatch) figures() (terms, maxWinners int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ws := range w.winners {
		terms++
		maxWinners = max(maxWinners, len(ws))
	}
	return terms, maxWinners
}

// grepFile returns the lines of a file that contain every needle.
func grepFile(path string, needles ...string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		ok := true
		for _, n := range needles {
			if !strings.Contains(line, n) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}
