package dataanalysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Seed makes the generated inputs the same on every run.
const Seed = 20250101

// product is one item sold in sales.csv and described in products.json.
type product struct {
	SKU      string  `json:"sku"`
	Name     string  `json:"name"`
	Category string  `json:"category"`
	UnitCost float64 `json:"unit_cost"`
	price    float64
}

var products = []product{
	{"P-100", "Widget", "Hardware", 1.40, 2.50},
	{"P-101", "Gadget", "Hardware", 7.10, 12.00},
	{"P-102", "Gizmo", "Electronics", 4.75, 8.00},
	{"P-103", "Doohickey", "Accessories", 0.55, 1.25},
	{"P-104", "Thingamajig", "Electronics", 18.00, 30.00},
	{"P-105", "Whatsit", "Accessories", 0.30, 0.75},
	{"P-106", "Sprocket", "Hardware", 2.20, 4.50},
	{"P-107", "Flux Capacitor", "Electronics", 55.00, 88.00},
}

var (
	regions   = []string{"North", "South", "East", "West"}
	segments  = []string{"Consumer", "Corporate", "Small Business"}
	countries = []string{"BR", "DE", "FR", "IN", "JP", "US"}
	first     = []string{"Ada", "Ben", "Chloe", "Dev", "Emma", "Farid", "Greta", "Hiro", "Ines", "Jon", "Kira", "Luis", "Mona", "Nils"}
	last      = []string{"Smith", "Okafor", "Rossi", "Tanaka", "Muller", "Silva", "Kowalski", "Nguyen", "Haddad", "Berg"}
)

// Generate returns the suite's input files by name, deterministically.
func Generate() map[string][]byte {
	r := rand.New(rand.NewPCG(Seed, Seed>>3))
	out := map[string][]byte{}
	out["customers.csv"], out["customers_raw.csv"] = customers(r)
	out["sales.csv"] = sales(r)
	b, _ := json.MarshalIndent(products, "", "  ")
	out["products.json"] = append(b, '\n')
	out["sensors.csv"] = sensors(r)
	out["events.json"] = events(r)
	return out
}

func customers(r *rand.Rand) (clean, raw []byte) {
	var c, w bytes.Buffer
	c.WriteString("customer_id,name,segment,signup_date\n")
	w.WriteString("customer_id,name,email\n")
	day0 := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
	type person struct{ id, name, email string }
	var people []person
	for i := 1; i <= 40; i++ {
		name := first[r.IntN(len(first))] + " " + last[r.IntN(len(last))]
		id := fmt.Sprintf("C%03d", i)
		fmt.Fprintf(&c, "%s,%s,%s,%s\n", id, name, segments[r.IntN(len(segments))], day0.AddDate(0, 0, r.IntN(700)).Format("2006-01-02"))
		email := strings.ToLower(strings.ReplaceAll(name, " ", ".")) + fmt.Sprintf("%d@example.com", i)
		people = append(people, person{id, name, email})
	}
	// The raw export repeats some customers with other ids, case and spacing.
	rows := make([]person, 0, 60)
	rows = append(rows, people...)
	for n := 0; n < 18; n++ {
		p := people[r.IntN(len(people))]
		email := p.email
		switch n % 3 {
		case 0:
			email = strings.ToUpper(email[:1]) + email[1:]
		case 1:
			email = "  " + strings.ToUpper(email) + " "
		}
		rows = append(rows, person{fmt.Sprintf("C%03d", 100+n), " " + p.name + "  ", email})
	}
	r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	for _, p := range rows {
		fmt.Fprintf(&w, "%s,\"%s\",\"%s\"\n", p.id, p.name, p.email)
	}
	return c.Bytes(), w.Bytes()
}

func sales(r *rand.Rand) []byte {
	var b bytes.Buffer
	b.WriteString("order_id,date,customer_id,region,product,units,unit_price\n")
	day0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	type order struct {
		day int
		row string
	}
	var orders []order
	for i := 0; i < 400; i++ {
		day := r.IntN(182)
		if day%7 == 3 && r.IntN(2) == 0 { // some days have no orders
			day++
		}
		p := products[r.IntN(len(products))]
		orders = append(orders, order{day, fmt.Sprintf("%s,C%03d,%s,%s,%d,%.2f",
			day0.AddDate(0, 0, day).Format("2006-01-02"), 1+r.IntN(40), regions[r.IntN(len(regions))], p.Name, 1+r.IntN(10), p.price)})
	}
	sort.SliceStable(orders, func(i, j int) bool { return orders[i].day < orders[j].day })
	for i, o := range orders {
		fmt.Fprintf(&b, "O%04d,%s\n", 1001+i, o.row)
	}
	return b.Bytes()
}

func sensors(r *rand.Rand) []byte {
	var b bytes.Buffer
	b.WriteString("sensor_id,timestamp,temperature\n")
	t0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	for s := 1; s <= 5; s++ {
		base := 18 + 2*float64(s)
		spikes := map[int]float64{10 + r.IntN(50): 15, 60 + r.IntN(50): -14}
		for h := 0; h < 120; h++ {
			v := base + 3*math.Sin(2*math.Pi*float64(h)/24) + 0.5*r.NormFloat64() + spikes[h]
			cell := fmt.Sprintf("%.2f", v)
			if spikes[h] == 0 && r.IntN(50) == 0 {
				cell = ""
			}
			fmt.Fprintf(&b, "S%d,%s,%s\n", s, t0.Add(time.Duration(h)*time.Hour).Format("2006-01-02 15:04"), cell)
		}
	}
	return b.Bytes()
}

func events(r *rand.Rand) []byte {
	type user struct {
		ID      string `json:"id"`
		Country string `json:"country"`
	}
	type event struct {
		ID     int      `json:"event_id"`
		User   user     `json:"user"`
		Type   string   `json:"type"`
		TS     string   `json:"ts"`
		Amount *float64 `json:"amount,omitempty"`
	}
	users := make([]user, 50)
	for i := range users {
		users[i] = user{fmt.Sprintf("U%02d", i+1), countries[r.IntN(len(countries))]}
	}
	t0 := time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)
	evs := make([]event, 300)
	for i := range evs {
		e := event{ID: 5000 + i, User: users[r.IntN(len(users))], TS: t0.Add(time.Duration(i*17+r.IntN(15)) * time.Minute).Format(time.RFC3339)}
		switch x := r.IntN(10); {
		case x < 6:
			e.Type = "view"
		case x < 9:
			e.Type = "click"
		default:
			e.Type = "purchase"
			a := math.Round((5+r.Float64()*120)*100) / 100
			e.Amount = &a
		}
		evs[i] = e
	}
	b, _ := json.MarshalIndent(evs, "", "  ")
	return append(b, '\n')
}
