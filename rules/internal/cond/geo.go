package cond

import (
	"math"

	"github.com/expr-lang/expr/ast"

	"github.com/cepheus-cep/cepheus/event"
)

// earthRadiusKm is the mean Earth radius used by distance_km.
const earthRadiusKm = 6371.0088

// distanceKm compiles distance_km(lat1, lon1, lat2, lon2): the great-circle
// (haversine) distance in kilometres between two points given in degrees.
// Impossible-travel rules need it. A null or non-numeric argument is a
// run-time error (the condition is then false and counted).
func (c *compiler) distanceKm(n *ast.CallNode) (*compiledNode, error) {
	if len(n.Arguments) != 4 {
		return nil, c.errorf(n, "distance_km takes four numbers: lat1, lon1, lat2, lon2 (degrees)")
	}
	var leaves [4]leafNode
	operands := make([]*compiledNode, 4)
	for i, a := range n.Arguments {
		x, err := c.compileScalar(a)
		if err != nil {
			return nil, err
		}
		if !x.typ.numLike() && x.typ != tyNil {
			return nil, c.errorf(a, "invalid argument for distance_km (type %s): want a number of degrees", x.typ)
		}
		leaves[i] = x.leaf
		operands[i] = x
	}
	site := c.site(n)
	args := func(fr frame) (deg [4]float64, _ *Error) {
		for i := range leaves {
			v, err := leaves[i].get(fr)
			if err != nil {
				return deg, err
			}
			f, ok := v.AsFloat()
			if !ok {
				return deg, site.fail("invalid argument for distance_km (type %s)", v.Kind())
			}
			deg[i] = f
		}
		return deg, nil
	}
	x := c.scalar(n, tyFloat, func(fr frame) (event.Value, *Error) {
		deg, err := args(fr)
		if err != nil {
			return event.Null, err
		}
		return event.Float(haversineKm(deg[0], deg[1], deg[2], deg[3])), nil
	}, operands...)
	if !x.isConst() {
		x.geo = args
	}
	return x, nil
}

// distanceOrder compiles distance_km(...) op k for a constant k: most
// pairs of an impossible-travel rule are far nearer (or further) than k,
// which bounds that need no trigonometry tell; the others are computed.
// The outcome is always that of comparing the computed distance.
func distanceOrder(op binOp, args func(frame) ([4]float64, *Error), k float64) boolFn {
	return func(fr frame) (bool, *Error) {
		deg, err := args(fr)
		if err != nil {
			return false, err
		}
		if lo, hi, ok := distanceBounds(deg); ok {
			// The margin dwarfs the rounding of the haversine and of the
			// bounds (well under a metre at these distances).
			const margin = 1 // km
			switch {
			case hi+margin < k: // the distance is below k
				return op == opLt || op == opLe || op == opNe, nil
			case lo-margin > k: // above k
				return op == opGt || op == opGe || op == opNe, nil
			}
		}
		return cmpOrdered(op, haversineKm(deg[0], deg[1], deg[2], deg[3]), k), nil
	}
}

// distanceBounds returns bounds of the great-circle distance between two
// points in degrees: the distance is at least the arc between their
// latitudes and at most that plus the arc between their longitudes (the
// way along a meridian, then along a parallel no longer than the
// equator's arc). ok is false for a latitude outside [-90, 90] or a
// value that is not finite, where the haversine is no distance.
func distanceBounds(deg [4]float64) (lo, hi float64, ok bool) {
	const rad = math.Pi / 180
	lat1, lon1, lat2, lon2 := deg[0], deg[1], deg[2], deg[3]
	if !(math.Abs(lat1) <= 90 && math.Abs(lat2) <= 90 && math.Abs(lon1) <= 1e6 && math.Abs(lon2) <= 1e6) {
		return 0, 0, false
	}
	dLon := math.Mod(math.Abs(lon2-lon1), 360)
	dLon = min(dLon, 360-dLon)
	dLat := math.Abs(lat2 - lat1)
	return earthRadiusKm * dLat * rad, earthRadiusKm * (dLat + dLon) * rad, true
}

// haversineKm is the great-circle distance between two points in degrees.
func haversineKm(lat1, lon1, lat2, lon2 float64) float64 {
	const rad = math.Pi / 180
	dLat := (lat2 - lat1) * rad
	dLon := (lon2 - lon1) * rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) +
		math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthRadiusKm * math.Asin(math.Min(1, math.Sqrt(a)))
}
