package federation

import (
	"fmt"
	"strings"
)

// AppIDPrefix starts every app ID the routers mint (app-f1, app-f2, …); a
// sub-cluster's own app IDs (app-N) never do, so the two cannot collide.
// router/fedstate mints them; the servers check them here, where both
// may look (a test keeps the two constants equal).
const AppIDPrefix = "app-f"

// maxAppIDDigits bounds the number in a federation app ID: the routers
// count apps in a uint64.
const maxAppIDDigits = 20

// ValidateAppID checks that id is an app ID the routers mint: AppIDPrefix
// then a decimal number, with no leading zero. It names the field first.
func ValidateAppID(field, id string) error {
	n, ok := strings.CutPrefix(id, AppIDPrefix)
	valid := ok && n != "" && len(n) <= maxAppIDDigits && n[0] != '0'
	for i := 0; valid && i < len(n); i++ {
		valid = n[i] >= '0' && n[i] <= '9'
	}
	if !valid {
		return fmt.Errorf("%s %.64q is not a federation app ID (%sN)", field, id, AppIDPrefix)
	}
	return nil
}
